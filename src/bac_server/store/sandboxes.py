"""Sandbox rows and their event log: what :class:`SandboxStore` keeps for every sandbox,
live or ended, so a restart re-attaches the live ones (``control.sandboxes.reconcile``) and
``GET /sandboxes/{id}/logs`` answers after the end."""

from __future__ import annotations

from collections.abc import Collection, Sequence
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
    # The name of the API key that created it (None: made before names were kept, or by
    # the server itself, e.g. a fork's parent's key is not known to it).
    key_name: str | None = None


@dataclass(frozen=True)
class EventRecord:
    sandbox_id: str
    team_id: str
    at: datetime
    kind: str  # created, started, timeout_set, connected, timeout, killed, died, ...
    message: str
    level: str = "info"
    # Strings for the lifecycle kinds; a trace report's numbers and flags stay typed.
    fields: dict[str, Any] = field(default_factory=dict)
    # Set by the store: the event's id (ascending in write order), the sandbox's metadata
    # when it was written (a record written with metadata keeps its own).
    event_id: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    # Its type on the events API and webhooks (``sandbox.lifecycle.*``), None when it is
    # not one of theirs; set by the control plane's vocabulary of kinds.
    wire_type: str | None = None


@dataclass(frozen=True)
class SandboxChange:
    """One sandbox's new state and lifecycle settings and the event saying why (if any),
    one of many written together (``SandboxStore.update_sandboxes``)."""

    sandbox_id: str
    state: str
    lifecycle: dict[str, Any]
    event: EventRecord | None = None


@dataclass(frozen=True)
class TraceQuery:
    """Events of one team, oldest first after ``after_id``: one sandbox's, or (no
    ``sandbox_id``) every sandbox's whose metadata holds each ``metadata`` pair."""

    team_id: str
    sandbox_id: str | None = None
    after_id: int = 0
    kinds: frozenset[str] = frozenset()  # empty: every kind
    since: datetime | None = None
    until: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    limit: int = 100


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

    async def update_sandboxes(self, changes: Sequence[SandboxChange]) -> None:
        """Apply every change and append its event, all in one transaction (a fleet's
        pause: one commit for hundreds of rows)."""
        ...

    async def get_sandbox(self, sandbox_id: str) -> SandboxRecord | None: ...

    async def sandboxes_in_states(self, states: Collection[str]) -> list[SandboxRecord]: ...

    async def add_event(self, event: EventRecord) -> None: ...

    async def events(
        self, sandbox_id: str, *, since: datetime | None, limit: int, newest_first: bool
    ) -> list[EventRecord]: ...

    async def add_events(self, events: Sequence[EventRecord]) -> None:
        """Append many, in one transaction (a trace's batch)."""
        ...

    async def trace(self, query: TraceQuery) -> list[EventRecord]: ...

    async def prune_events(self, *, before: datetime, keep_per_sandbox: int,
                           counted_kinds: Collection[str]) -> int:
        """Delete every event older than ``before``, and of each sandbox's events of the
        ``counted_kinds`` all but its newest ``keep_per_sandbox``; returns how many went."""
        ...
