"""Response bodies of checkpoints (Bac) and snapshots (E2B ``SnapshotInfo``)."""

from __future__ import annotations

from typing import Any

from bac_server.api.views import rfc3339
from bac_server.store import CheckpointRecord


def checkpoint(rec: CheckpointRecord) -> dict[str, Any]:
    return {
        "checkpointID": rec.checkpoint_id,
        "sandboxID": rec.sandbox_id,
        "name": rec.name,
        "createdAt": rfc3339(rec.created_at),
        "sizeBytes": rec.size_bytes,
        "memory": rec.memory,
    }


def snapshot(rec: CheckpointRecord) -> dict[str, Any]:
    names = [rec.name] if rec.name else []
    return {"snapshotID": rec.checkpoint_id, "names": names, "sandboxID": rec.sandbox_id,
            "createdAt": rfc3339(rec.created_at), "sizeBytes": rec.size_bytes,
            "memory": rec.memory}
