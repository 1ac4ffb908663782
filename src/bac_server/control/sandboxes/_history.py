"""Read-only history of a sandbox: its event log and resource samples, also after it ended."""

from __future__ import annotations

from datetime import datetime

from bac_server.store import (
    EventRecord,
    MetricRecord,
    MetricStore,
    SandboxRecord,
    SandboxStore,
)

from ..errors import SandboxNotFoundError
from ..keys import Team
from ._registry import Registry


class History:
    def __init__(self, *, sandbox_store: SandboxStore, metric_store: MetricStore,
                 registry: Registry) -> None:
        self._sandbox_store = sandbox_store
        self._metric_store = metric_store
        self._registry = registry

    async def sandbox(self, team: Team, sandbox_id: str) -> SandboxRecord:
        """The team's sandbox, live or ended; another team's looks like a missing one."""
        record = await self._sandbox_store.get_sandbox(sandbox_id)
        if record is None or record.team_id != team.team_id:
            raise SandboxNotFoundError(sandbox_id)
        return record

    async def events(
        self,
        team: Team,
        sandbox_id: str,
        *,
        since: datetime | None,
        limit: int,
        newest_first: bool = False,
    ) -> list[EventRecord]:
        await self.sandbox(team, sandbox_id)
        return await self._sandbox_store.events(
            sandbox_id, since=since, limit=limit, newest_first=newest_first
        )

    async def metrics(
        self, team: Team, sandbox_id: str, start: datetime | None, end: datetime | None
    ) -> list[MetricRecord]:
        await self.sandbox(team, sandbox_id)
        return await self._metric_store.metrics(sandbox_id, start, end)
