"""Checkpoints (points of a sandbox's timeline) and snapshots (saved states that outlive
their sandbox): what :class:`CheckpointStore` keeps (``control.checkpoints``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


class CheckpointKind(enum.Enum):
    """What keeps a saved state; the values are the ``kind`` column's."""

    CHECKPOINT = "checkpoint"  # a point of the sandbox's timeline: ends with it
    SNAPSHOT = "snapshot"  # outlives it and starts sandboxes (E2B's snapshots)
    FORK = "fork"  # shared by the forks being made from it: deleted once they started


@dataclass(frozen=True)
class CheckpointRecord:
    """A saved state of a sandbox, of one ``CheckpointKind``."""

    checkpoint_id: str
    team_id: str
    sandbox_id: str  # the sandbox it was taken from
    kind: CheckpointKind
    name: str | None
    created_at: datetime
    size_bytes: int
    memory: bool
    template_id: str
    # The envd token in force when it was taken: a restored envd still expects it once.
    envd_access_token: str
    cpu_count: int
    memory_mb: int
    env_vars: dict[str, str] = field(default_factory=dict)


class CheckpointStore(Protocol):
    """Every method is one transaction. Env vars and the envd token are sealed at rest."""

    async def add_checkpoint(self, checkpoint: CheckpointRecord) -> None:
        """``StoreConflict`` if the id exists."""
        ...

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None: ...

    async def list_checkpoints(
        self, team_id: str | None, *, sandbox_id: str | None = None,
        kind: CheckpointKind | None = None, name: str | None = None,
    ) -> list[CheckpointRecord]:
        """Oldest first; ``team_id=None``: every team's."""
        ...

    async def delete_checkpoint(self, checkpoint_id: str) -> bool: ...

    async def checkpoint_bytes(self, team_id: str) -> int:
        """Disk used by all of the team's checkpoints and snapshots."""
        ...

    async def bytes_by_sandbox(self) -> dict[str, int]:
        """Disk used by the checkpoints and snapshots taken of each sandbox (every team's;
        read without opening any sealed column)."""
        ...
