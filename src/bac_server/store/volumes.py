"""Volumes: a team's named persistent file systems, mountable into its sandboxes
(``control.volumes``; docs/volumes-secrets-artefacts.md, *Volumes*).

A volume's row names it (unique per team: sandboxes mount volumes by name), holds the
bearer token of its content API (sealed at rest: ``GET /volumes/{id}`` hands it back, so
it cannot be hashed) and the size of its file system. The mounts of each sandbox are rows
of their own, (sandbox, path) → volume, so a restarted server knows what every sandbox
mounts and a destroy can tell a volume in use.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class VolumeRecord:
    volume_id: str
    team_id: str
    name: str
    token: str  # the content API's bearer token (in clear here; sealed in the table)
    size_mb: int  # the size of its file system on the host
    created_at: datetime


@dataclass(frozen=True)
class VolumeMountRecord:
    sandbox_id: str
    path: str  # absolute, inside the sandbox
    volume_id: str
    team_id: str


class VolumeStore(Protocol):
    """Every method is one transaction."""

    async def add_volume(self, volume: VolumeRecord, *,
                         max_team_mb: int | None = None) -> bool:
        """Insert it; ``StoreConflict`` when the team has a volume of that name. False:
        with it the team's volumes would measure more than ``max_team_mb`` (nothing
        inserted; checked with the insert under the team's lock, so creates at once
        never pass it together)."""
        ...

    async def get_volume(self, volume_id: str) -> VolumeRecord | None: ...

    async def volume_named(self, team_id: str, name: str) -> VolumeRecord | None: ...

    async def list_volumes(self, team_id: str) -> list[VolumeRecord]:
        """The team's volumes, oldest first."""
        ...

    async def all_volumes(self) -> list[VolumeRecord]:
        """Every team's (what the host must have mounted at start-up)."""
        ...

    async def delete_volume(self, volume_id: str) -> bool: ...

    async def add_mounts(self, mounts: list[VolumeMountRecord]) -> None: ...

    async def mounts_of(self, sandbox_id: str) -> list[VolumeMountRecord]:
        """The sandbox's mounts, by path."""
        ...

    async def all_mounts(self) -> list[VolumeMountRecord]: ...

    async def mounts_of_volume(self, volume_id: str) -> list[VolumeMountRecord]: ...

    async def delete_mounts(self, sandbox_id: str) -> None: ...
