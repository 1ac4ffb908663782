"""The store interface: what the control plane persists, independent of the database.

The embedded default is SQLite (:mod:`bac_server.store.sql`); a PostgreSQL store implements
the same protocol. Only ``bac_server.app`` names a concrete store.

Error tree (server side, store layer)::

    StoreError
    └── StoreConflict     a row with this key already exists
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, Protocol

from bac_server.store.records import (
    ApiKeyRecord,
    CheckpointRecord,
    EventRecord,
    MetricRecord,
    SandboxRecord,
    TeamRecord,
)
from bac_server.store.template_base import TemplateRecords
from bac_server.store.template_gc_base import TemplateGcRecords


class StoreError(Exception):
    """Base class of every store failure."""


class StoreConflict(StoreError):
    """The row to insert already exists."""


class Store(TemplateRecords, TemplateGcRecords, Protocol):
    """Durable state of the control plane. Every method is one transaction.

    Templates, builds, tags and uploads: :class:`.template_base.TemplateRecords`; what the
    collection of template storage asks: :class:`.template_gc_base.TemplateGcRecords`."""

    async def close(self) -> None: ...

    # teams and API keys
    async def ensure_team(self, name: str) -> TeamRecord:
        """The team with this name, created when missing."""
        ...

    async def add_api_key(self, key: ApiKeyRecord) -> None: ...

    async def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not."""
        ...

    async def list_api_keys(self) -> list[tuple[ApiKeyRecord, TeamRecord]]: ...

    async def revoke_api_key(self, key_id_or_prefix: str, at: datetime) -> int:
        """Revoke keys whose id or prefix matches; returns how many changed."""
        ...

    # sandboxes and their event log
    async def insert_sandbox(self, sandbox: SandboxRecord, *events: EventRecord) -> None:
        """Insert the row and its first events together; ``StoreConflict`` if the id exists."""
        ...

    async def update_sandbox(
        self,
        sandbox_id: str,
        *,
        state: str | None = None,
        end_at: datetime | None = None,
        ended_at: datetime | None = None,
        event: EventRecord | None = None,
        lifecycle: dict[str, Any] | None = None,
        network: dict[str, Any] | None = None,
        allow_internet_access: bool | None = None,
    ) -> None: ...

    async def get_sandbox(self, sandbox_id: str) -> SandboxRecord | None: ...

    async def sandboxes_in_states(self, states: Collection[str]) -> list[SandboxRecord]: ...

    async def add_event(self, event: EventRecord) -> None: ...

    async def events(
        self, sandbox_id: str, *, since: datetime | None, limit: int, newest_first: bool
    ) -> list[EventRecord]: ...

    # resource usage samples
    async def add_metrics(self, samples: list[MetricRecord]) -> None: ...

    async def metrics(
        self, sandbox_id: str, start: datetime | None, end: datetime | None
    ) -> list[MetricRecord]: ...

    async def prune_metrics(self, before: datetime) -> int: ...

    # checkpoints (a sandbox's timeline) and snapshots
    async def add_checkpoint(self, checkpoint: CheckpointRecord) -> None:
        """``StoreConflict`` if the id exists."""
        ...

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None: ...

    async def list_checkpoints(
        self, team_id: str | None, *, sandbox_id: str | None = None, kind: str | None = None,
        name: str | None = None,
    ) -> list[CheckpointRecord]:
        """Oldest first; ``team_id=None``: every team's."""
        ...

    async def delete_checkpoint(self, checkpoint_id: str) -> bool: ...

    async def checkpoint_bytes(self, team_id: str) -> int:
        """Disk used by all of the team's checkpoints and snapshots."""
        ...
