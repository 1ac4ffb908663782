"""Response bodies: control-plane objects rendered with the exact wire keys.

Every key the SDK's generated models require is always present (a missing one is a
``KeyError`` inside the SDK).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bac_server.control import LiveSandbox
from bac_server.store import EventRecord, MetricRecord

CLIENT_ID = "bac"


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def rfc3339_unix(at: float) -> str:
    return rfc3339(datetime.fromtimestamp(at, UTC))


def sandbox(sbx: LiveSandbox, *, envd_version: str, domain: str) -> dict[str, Any]:
    """``Sandbox``: the answer to create and connect."""
    body: dict[str, Any] = {
        "templateID": sbx.template_id,
        "sandboxID": sbx.sandbox_id,
        "clientID": CLIENT_ID,
        "envdVersion": envd_version,
        "envdAccessToken": sbx.envd_access_token,
        "trafficAccessToken": sbx.traffic_access_token,
        "domain": domain,
    }
    if sbx.alias is not None:
        body["alias"] = sbx.alias
    return body


def listed(sbx: LiveSandbox, *, envd_version: str) -> dict[str, Any]:
    """``ListedSandbox``: one item of a listing."""
    body: dict[str, Any] = {
        "templateID": sbx.template_id,
        "sandboxID": sbx.sandbox_id,
        "clientID": CLIENT_ID,
        "startedAt": rfc3339(sbx.started_at),
        "endAt": rfc3339(sbx.end_at),
        "envdVersion": envd_version,
        "cpuCount": sbx.cpu_count,
        "memoryMB": sbx.memory_mb,
        "diskSizeMB": sbx.disk_mb,
        "state": sbx.state.value,
        "metadata": dict(sbx.metadata),
        "volumeMounts": [],
    }
    if sbx.alias is not None:
        body["alias"] = sbx.alias
    return body


def detail(sbx: LiveSandbox, *, envd_version: str, domain: str) -> dict[str, Any]:
    """``SandboxDetail``: the answer to get."""
    body = listed(sbx, envd_version=envd_version)
    body.update(
        {
            "envdAccessToken": sbx.envd_access_token,
            "allowInternetAccess": sbx.allow_internet_access,
            "domain": domain,
            "network": dict(sbx.network or {}),
            "lifecycle": {"autoResume": sbx.auto_resume, "onTimeout": sbx.on_timeout},
        }
    )
    mode = _pause_mode(sbx)
    if mode is not None:
        body["pauseMode"] = mode
    return body


def _pause_mode(sbx: LiveSandbox) -> str | None:
    if sbx.paused_as is None:
        return None
    return "filesystem" if sbx.paused_as == "filesystem" else "full"


def metric(sample: MetricRecord) -> dict[str, Any]:
    return {
        "timestamp": rfc3339(sample.at),
        "timestampUnix": int(sample.at.timestamp()),
        "cpuCount": sample.cpu_count,
        "cpuUsedPct": sample.cpu_used_pct,
        "memUsed": sample.mem_used,
        "memTotal": sample.mem_total,
        "memCache": sample.mem_cache,
        "diskUsed": sample.disk_used,
        "diskTotal": sample.disk_total,
    }


def log_entry(ev: EventRecord) -> dict[str, Any]:
    return {
        "timestamp": rfc3339(ev.at),
        "message": ev.message,
        "level": ev.level if ev.level in {"debug", "info", "warn", "error"} else "info",
        "fields": dict(ev.fields),
    }


def log_line(ev: EventRecord) -> dict[str, Any]:
    return {"timestamp": rfc3339(ev.at), "line": f"[{ev.kind}] {ev.message}"}
