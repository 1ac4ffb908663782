"""An event as the events API answers it and webhooks deliver it (E2B's v2 shape).

``id`` is a UUID derived from the log's row, so the API and every delivery of an event
name it alike; ``sandboxExecutionId`` one derived from the sandbox and its start.
``eventData.execution`` (start, vCPUs, memory, run time in ms) comes with the killed and
paused types, as E2B sends it; ``eventCategory``/``eventLabel`` are E2B's older names of
the type, kept for clients that still read them.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from bac_server.store import LoggedEvent

_NAMESPACE = uuid.UUID("5b0f3b8e-3d6c-4c59-9a61-6f1f0c1f4e2a")
_LIFECYCLE = "sandbox.lifecycle."
_WITH_EXECUTION = {_LIFECYCLE + "killed", _LIFECYCLE + "paused"}
_LABELS = {"created": "create", "updated": "update", "killed": "kill", "paused": "pause",
           "resumed": "resume", "checkpointed": "checkpoint"}


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def event_uuid(logged: LoggedEvent) -> str:
    e = logged.event
    return str(uuid.uuid5(_NAMESPACE, f"{logged.event_id}/{e.sandbox_id}/{e.at.timestamp()}"))


def execution_id(sandbox_id: str, started_at: datetime | None) -> str:
    start = "" if started_at is None else repr(started_at.timestamp())
    return str(uuid.uuid5(_NAMESPACE, f"execution/{sandbox_id}/{start}"))


def _category_label(wire_type: str) -> tuple[str, str]:
    if wire_type.startswith(_LIFECYCLE):
        short = wire_type.removeprefix(_LIFECYCLE)
        return "lifecycle", _LABELS.get(short, short)
    category, _, label = wire_type.rpartition(".")
    return category, label


def payload(logged: LoggedEvent) -> dict[str, Any]:
    e = logged.event
    wire_type = e.wire_type or ""
    data: dict[str, Any] = {"sandbox_metadata": dict(logged.metadata)}
    if wire_type in _WITH_EXECUTION and logged.started_at is not None:
        data["execution"] = {
            "started_at": rfc3339(logged.started_at),
            "vcpu_count": logged.cpu_count,
            "memory_mb": logged.memory_mb,
            "execution_time": max(0, round((e.at - logged.started_at).total_seconds() * 1000)),
        }
    if not wire_type.startswith(_LIFECYCLE):  # Bac's own types carry their message
        data["message"] = e.message
        data["fields"] = {k: v for k, v in e.fields.items() if k != "kind"}
    category, label = _category_label(wire_type)
    return {
        "version": "v2",
        "id": event_uuid(logged),
        "type": wire_type,
        "eventCategory": category,
        "eventLabel": label,
        "eventData": data,
        "sandboxId": e.sandbox_id,
        "sandboxTeamId": e.team_id,
        "sandboxTemplateId": logged.template_id or "",
        "sandboxBuildId": logged.build_id or "",
        "sandboxExecutionId": execution_id(e.sandbox_id, logged.started_at),
        "timestamp": rfc3339(e.at),
    }
