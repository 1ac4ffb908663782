"""Sandbox rows and their event log: what :class:`SandboxStore` keeps for every sandbox,
live or ended, so a restart re-attaches the live ones (``control.sandboxes.reconcile``) and
``GET /sandboxes/{id}/logs`` answers after the end."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class SandboxRecord:
    sandbox_id: str
    team_id: str
    template_id: str
    alias: str | None
    state: str
    started_at: datetime
    end_at: datetime
    cpu_count: int
    memory_mb: int
    disk_mb: int
    envd_access_token: str
    traffic_access_token: str | None
    metadata: dict[str, str] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    network: dict[str, Any] | None = None
    allow_internet_access: bool | None = None
    ended_at: datetime | None = None
    # What happens at the timeout, auto-resume, how it is paused (see control.sandboxes.Lifecycle).
    lifecycle: dict[str, Any] | None = None


@dataclass(frozen=True)
class EventRecord:
    sandbox_id: str
    team_id: str
    at: datetime
    kind: str  # created, started, timeout_set, connected, timeout, killed, died, ...
    message: str
    level: str = "info"
    fields: dict[str, str] = field(default_factory=dict)
    # Its type on the events API and webhooks (``sandbox.lifecycle.*``), None when it is
    # not one of theirs; set by the control plane's vocabulary of kinds.
    wire_type: str | None = None


class SandboxStore(Protocol):
    """Every method is one transaction. Env vars and access tokens are sealed at rest."""

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
    ) -> None:
        """Change the given columns and append ``event``, together."""
        ...

    async def get_sandbox(self, sandbox_id: str) -> SandboxRecord | None: ...

    async def sandboxes_in_states(self, states: Collection[str]) -> list[SandboxRecord]: ...

    async def add_event(self, event: EventRecord) -> None: ...

    async def events(
        self, sandbox_id: str, *, since: datetime | None, limit: int, newest_first: bool
    ) -> list[EventRecord]: ...
