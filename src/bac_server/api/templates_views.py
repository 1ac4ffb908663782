"""Template API response bodies with E2B's exact keys (``Template``, ``TemplateWithBuilds``,
``TemplateBuildInfo``, ``BuildLogEntry``, ``TemplateTag``, ...).

Every key the SDK's generated models require is always present.
"""

from __future__ import annotations

import uuid
from typing import Any

from bac_server.api.views import rfc3339
from bac_server.control import Limits
from bac_server.control.templates import TemplateSummary
from bac_server.control.templates_resolve import Builtin
from bac_server.store import BuildLogRecord, BuildRecord, TagRecord, TemplateRecord

_BUILTIN_BUILDS = uuid.UUID("6f3c1a56-5a3e-4b8e-9c0e-bac0bac0bac0")


def names(template: TemplateRecord) -> list[str]:
    return [template.name, *template.aliases]


def build_requested(template: TemplateRecord, build: BuildRecord) -> dict[str, Any]:
    """``TemplateRequestResponseV3``."""
    return {"templateID": template.template_id, "buildID": build.build_id,
            "public": template.public, "names": names(template), "tags": list(build.tags),
            "aliases": names(template)}


def template(summary: TemplateSummary, *, limits: Limits, envd_version: str) -> dict[str, Any]:
    """``Template``: the build serving it is its ``default`` tag's (else newest ready)."""
    t = summary.template
    shown = summary.serving or summary.latest
    return {
        "templateID": t.template_id,
        "buildID": shown.build_id if shown is not None else "",
        "cpuCount": t.cpu_count or limits.default_cpu_count,
        "memoryMB": t.memory_mb or limits.default_memory_mb,
        "diskSizeMB": t.disk_mb or limits.default_disk_mb,
        "public": t.public,
        "aliases": names(t),
        "names": names(t),
        "createdAt": rfc3339(t.created_at),
        "updatedAt": rfc3339(t.updated_at),
        "createdBy": None,
        "lastSpawnedAt": None if t.last_spawned_at is None else rfc3339(t.last_spawned_at),
        "spawnCount": t.spawn_count,
        "buildCount": t.build_count,
        "envdVersion": envd_version,
        "buildStatus": summary.latest.status if summary.latest is not None else "waiting",
    }


def builtin(found: Builtin, *, limits: Limits, envd_version: str) -> dict[str, Any]:
    """A built-in template as a ``Template``: public, owned by no team."""
    at = rfc3339(found.built_at)
    every = [found.name, *found.aliases]
    return {
        "templateID": found.name,
        "buildID": str(uuid.uuid5(_BUILTIN_BUILDS, found.image.rootfs.parent.name)),
        "cpuCount": limits.default_cpu_count, "memoryMB": limits.default_memory_mb,
        "diskSizeMB": limits.default_disk_mb, "public": True, "aliases": every,
        "names": every, "createdAt": at, "updatedAt": at, "createdBy": None,
        "lastSpawnedAt": None, "spawnCount": 0, "buildCount": 1,
        "envdVersion": envd_version, "buildStatus": "ready",
    }


def build(b: BuildRecord, *, limits: Limits, envd_version: str) -> dict[str, Any]:
    """``TemplateBuild`` (an item of ``TemplateWithBuilds.builds``)."""
    body: dict[str, Any] = {
        "buildID": b.build_id, "status": b.status, "createdAt": rfc3339(b.created_at),
        "updatedAt": rfc3339(b.updated_at),
        "cpuCount": b.cpu_count or limits.default_cpu_count,
        "memoryMB": b.memory_mb or limits.default_memory_mb,
        "diskSizeMB": b.disk_mb or limits.default_disk_mb, "envdVersion": envd_version,
        "tags": list(b.tags),
    }
    if b.finished_at is not None:
        body["finishedAt"] = rfc3339(b.finished_at)
    if b.reason is not None:
        body["reason"] = reason(b, [])
    return body


def log_entry(e: BuildLogRecord) -> dict[str, Any]:
    """``BuildLogEntry``."""
    body: dict[str, Any] = {"timestamp": rfc3339(e.at), "message": e.message, "level": e.level}
    if e.step is not None:
        body["step"] = e.step
    return body


def reason(b: BuildRecord, entries: list[BuildLogRecord]) -> dict[str, Any]:
    """``BuildStatusReason``: why the build failed, in which step, with its last lines."""
    body: dict[str, Any] = {"message": b.reason or "build failed"}
    if b.reason_step is not None:
        body["step"] = b.reason_step
    if entries:
        body["logEntries"] = [log_entry(e) for e in entries]
    return body


def build_status(b: BuildRecord, entries: list[BuildLogRecord],
                 last: list[BuildLogRecord]) -> dict[str, Any]:
    """``TemplateBuildInfo``: status, a page of log lines, and the reason once failed."""
    body: dict[str, Any] = {
        "templateID": b.template_id, "buildID": b.build_id, "status": b.status,
        "logEntries": [log_entry(e) for e in entries],
        "logs": [f"{rfc3339(e.at)} {e.message}" for e in entries],
    }
    if b.status == "error":
        body["reason"] = reason(b, last)
    return body


def tag(t: TagRecord) -> dict[str, Any]:
    return {"tag": t.tag, "buildID": t.build_id, "createdAt": rfc3339(t.created_at)}
