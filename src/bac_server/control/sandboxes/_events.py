"""The per-sandbox event log: one helper to make entries, one vocabulary of kinds, and the
type each kind has on the events API and webhooks (:data:`WIRE_TYPES`).

A kind listed in :data:`WIRE_TYPES` is a lifecycle event (``GET /events/sandboxes``) and
is delivered to the webhooks that ask for its type; the others stay in the sandbox's log
only. A new kind that webhooks should see is its member here and its line there.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime

from bac_server.store import EventRecord


class EventKind(enum.Enum):
    CREATED = "created"
    STARTED = "started"
    CREATE_FAILED = "create_failed"
    TIMEOUT_SET = "timeout_set"
    CONNECTED = "connected"
    TIMEOUT = "timeout"
    KILLED = "killed"
    DIED = "died"
    REATTACHED = "reattached"
    PAUSED = "paused"
    RESUMED = "resumed"
    CHECKPOINTED = "checkpointed"
    RESTORED = "restored"
    SNAPSHOT_TAKEN = "snapshot_taken"
    FORKED = "forked"
    NETWORK_UPDATED = "network_updated"
    # Reported from inside the sandbox by envd (``control.sandboxes._trace``).
    PROCESS = "process"
    TRANSFER = "transfer"
    # Read from the host's egress counters and destination log (``_trace``).
    NETWORK = "network"
    EGRESS_DENIED = "egress_denied"
    # Errors inside: the kernel's OOM killer ended a process (seen by the sampler), a
    # resume could not restore the saved state (the sandbox stays paused).
    OOM_KILL = "oom_kill"
    # The sandbox's disk filled up (space or inodes): writes inside fail with ENOSPC.
    # Seen by the sampler, once per time it fills.
    DISK_FULL = "disk_full"
    RESUME_FAILED = "resume_failed"
    # envd died and the sandbox's keeper (its PID 1) started it again: reported from
    # inside (``_trace``), with the number of restarts so far.
    ENVD_RESTARTED = "envd_restarted"
    # The control plane's health checks of envd (``_health``): it stopped answering for
    # the bound, or answers again. Bac event types, delivered by webhooks.
    UNHEALTHY = "unhealthy"
    HEALTHY = "healthy"
    # A sandbox frozen by the kill switch or a cap, written to disk afterwards.
    SAVED = "saved"
    # Something is near a bound (e.g. 80 % of a cap): a Bac event type, delivered by webhooks.
    WARNING = "warning"
    # A file or directory of the sandbox promoted to an artefact (``control.artefacts``),
    # or promoted again with the same content (field ``created``).
    ARTEFACT_PROMOTED = "artefact_promoted"


class EndReason(enum.Enum):
    """Why a sandbox ended: the ``reason`` field of its last event."""

    REQUEST = "request"  # killed through the API (or the SDK, the CLI)
    TIMEOUT = "timeout"  # its end came
    IDLE = "idle"  # the idle policy ended it
    CAP = "cap"  # a spending cap's action
    KILL_SWITCH = "kill_switch"  # the operator's fleet kill
    CRASH = "crash"  # its processes died on their own
    SERVER_RESTART = "server_restart"  # gone (or half-made) when the server started


_LIFECYCLE = "sandbox.lifecycle."
WIRE_TYPES: dict[EventKind, str] = {
    EventKind.CREATED: _LIFECYCLE + "created",
    EventKind.TIMEOUT_SET: _LIFECYCLE + "updated",
    EventKind.CONNECTED: _LIFECYCLE + "updated",
    EventKind.NETWORK_UPDATED: _LIFECYCLE + "updated",
    EventKind.TIMEOUT: _LIFECYCLE + "killed",  # or paused, when its fields name a pause mode
    EventKind.KILLED: _LIFECYCLE + "killed",
    EventKind.DIED: _LIFECYCLE + "killed",
    EventKind.PAUSED: _LIFECYCLE + "paused",
    EventKind.RESUMED: _LIFECYCLE + "resumed",
    EventKind.CHECKPOINTED: _LIFECYCLE + "checkpointed",
    EventKind.SNAPSHOT_TAKEN: _LIFECYCLE + "checkpointed",
    EventKind.WARNING: "bac.sandbox.warning",
    EventKind.UNHEALTHY: "bac.sandbox.unhealthy",
    EventKind.HEALTHY: "bac.sandbox.healthy",
}
EVENT_TYPES: tuple[str, ...] = tuple(sorted(set(WIRE_TYPES.values())))


def wire_type(kind: EventKind, fields: dict[str, str]) -> str | None:
    """The kind's type on the events API and webhooks (None: not one of theirs)."""
    if "mode" in fields and kind in (EventKind.TIMEOUT, EventKind.PAUSED):
        return WIRE_TYPES[EventKind.PAUSED]  # a timeout that paused (autoPause, idle)
    return WIRE_TYPES.get(kind)


def event(
    sandbox_id: str,
    team_id: str,
    kind: EventKind,
    message: str,
    *,
    level: str = "info",
    **fields: str,
) -> EventRecord:
    return EventRecord(
        sandbox_id=sandbox_id,
        team_id=team_id,
        at=datetime.now(UTC),
        kind=kind.value,
        message=message,
        level=level,
        fields={"kind": kind.value, **fields},
        wire_type=wire_type(kind, fields),
    )


def warning(sandbox_id: str, team_id: str, message: str, **fields: str) -> EventRecord:
    """A warning event (e.g. a sandbox at 80 % of a cap); written to the log
    (``SandboxStore.add_event``) it is delivered to the webhooks that ask for
    ``bac.sandbox.warning``."""
    return event(sandbox_id, team_id, EventKind.WARNING, message, level="warning", **fields)
