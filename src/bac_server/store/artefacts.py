"""Artefacts: files and directories an orchestrator promoted out of a sandbox into durable
storage, keyed by (team, run id, name) (``control.artefacts``).

The record names the blob on disk by its sha256 (a directory is kept as a tar); the row's
primary key is (team, run, name), so two promotions of one name race to one insert and
the loser reads the winner's row back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


class ArtefactKind(enum.Enum):
    """What was promoted; the values are the ``kind`` column's."""

    FILE = "file"
    DIRECTORY = "directory"  # kept as a tar of its tree


@dataclass(frozen=True)
class ArtefactRecord:
    team_id: str
    run_id: str
    name: str
    sha256: str  # hex, of the bytes kept (a directory's tar)
    size_bytes: int
    kind: ArtefactKind
    sandbox_id: str  # the sandbox it was promoted from
    source_path: str  # its path there
    created_at: datetime


class ArtefactStore(Protocol):
    """Every method is one transaction."""

    async def add_artefact(self, artefact: ArtefactRecord, *,
                           max_team_bytes: int | None = None) -> ArtefactRecord | None:
        """Insert it, or, when (team, run, name) exists, return the row already there
        (never ``StoreConflict``: the caller compares the two). None: with it the team's
        artefacts would use more than ``max_team_bytes`` (nothing inserted; checked
        together with the insert, so inserts at once never pass it together)."""
        ...

    async def get_artefact(self, team_id: str, run_id: str, name: str) -> ArtefactRecord | None:
        ...

    async def list_artefacts(self, team_id: str, run_id: str) -> list[ArtefactRecord]:
        """The run's artefacts, oldest first."""
        ...

    async def delete_artefact(self, team_id: str, run_id: str, name: str) -> bool: ...

    async def artefact_bytes(self, team_id: str) -> int:
        """Bytes of all of the team's artefacts."""
        ...

    async def artefacts_before(self, before: datetime, limit: int) -> list[ArtefactRecord]:
        """Every team's artefacts created before ``before``, oldest first."""
        ...

    async def blob_in_use(self, sha256: str) -> bool:
        """Whether any row (of any team) still names this blob."""
        ...
