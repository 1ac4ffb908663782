"""The per-sandbox event log: one helper to make entries, one vocabulary of kinds."""

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
    )
