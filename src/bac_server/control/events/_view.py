"""The lifecycle events API: ``GET /events/sandboxes`` and ``/events/sandboxes/{id}``, a
view of the event log by team (:mod:`..sandboxes._events` says which kinds are events and
their types). Events older than the retention (7 days, as E2B keeps them) are not listed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bac_server.store import EventLogStore, SandboxStore

from ..errors import InvalidRequest, SandboxNotFoundError
from ..keys import Team
from ..sandboxes import EVENT_TYPES
from ._payload import payload

MAX_LIMIT = 100
DEFAULT_LIMIT = 10
RETENTION = timedelta(days=7)


@dataclass(frozen=True)
class EventQuery:
    offset: int = 0
    limit: int = DEFAULT_LIMIT
    ascending: bool = False
    types: tuple[str, ...] = ()  # empty: every type


def event_types(given: Collection[str], what: str = "types") -> tuple[str, ...]:
    """``given`` checked against the known types (400 naming an unknown one)."""
    for item in given:
        if item not in EVENT_TYPES:
            raise InvalidRequest(f"{what}: unknown event type {item[:80]!r}; known: "
                                 + ", ".join(EVENT_TYPES))
    return tuple(dict.fromkeys(given))


class LifecycleEvents:
    def __init__(self, *, event_log: EventLogStore, sandbox_store: SandboxStore,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._event_log = event_log
        self._sandbox_store = sandbox_store
        self._clock = clock

    async def of_team(self, team: Team, query: EventQuery,
                   sandbox_id: str | None = None) -> list[dict[str, Any]]:
        """The team's events (of one sandbox: ``SandboxNotFoundError`` when it is not the
        team's), newest first unless ``ascending``."""
        if not 0 <= query.offset:
            raise InvalidRequest("offset must be at least 0")
        if not 1 <= query.limit <= MAX_LIMIT:
            raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}")
        types = event_types(query.types) or EVENT_TYPES
        if sandbox_id is not None:
            row = await self._sandbox_store.get_sandbox(sandbox_id)
            if row is None or row.team_id != team.team_id:
                raise SandboxNotFoundError(sandbox_id)
        found = await self._event_log.team_events(
            team.team_id, sandbox_id=sandbox_id, types=types, offset=query.offset,
            limit=query.limit, ascending=query.ascending, since=self._clock() - RETENTION)
        return [payload(e) for e in found]
