"""Usage and cost to date, as a team asks for it: per sandbox, team, day or metadata value,
over a range of UTC days (the current month by default), priced by the price table."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from bac_server.store import GroupBy, SandboxRecord, Usage, UsageQuery

from ..clock import Clock
from ..errors import InvalidRequest
from ..keys import Team
from ..sandboxes import History
from ._meter import Meter, day_of
from ._prices import PriceTable


@dataclass(frozen=True)
class UsageLine:
    key: str
    usage: Usage
    cost: float


@dataclass(frozen=True)
class UsageReport:
    since: str | None
    until: str | None
    total: UsageLine
    lines: list[UsageLine] = field(default_factory=list)


def _day(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    try:
        if len(value) != 10:
            raise ValueError(value)
        return date.fromisoformat(value).isoformat()
    except ValueError as exc:
        raise InvalidRequest(f"{what} must be a day YYYY-MM-DD, got {value[:40]!r}") from exc


class UsageReports:
    def __init__(self, *, meter: Meter, prices: PriceTable, history: History,
                 clock: Clock) -> None:
        self._meter = meter
        self.prices = prices
        self._history = history
        self._clock = clock

    def _line(self, key: str, usage: Usage) -> UsageLine:
        return UsageLine(key, usage, round(self.prices.cost(usage), 6))

    async def report(self, team: Team, *, group_by: str = "sandbox",
                     metadata: dict[str, str] | None = None, sandbox_id: str | None = None,
                     since: str | None = None, until: str | None = None) -> UsageReport:
        """``group_by``: ``sandbox``, ``team``, ``day`` or ``metadata.<key>``; ``since``
        and ``until`` are inclusive days (default: this month's first day to today)."""
        key = ""
        grouping: GroupBy
        if group_by.startswith("metadata."):
            key = group_by.removeprefix("metadata.")
            if not key:
                raise InvalidRequest("groupBy metadata.<key> needs a key")
            grouping = "metadata"
        elif group_by in ("sandbox", "team", "day"):
            grouping = group_by  # type: ignore[assignment]
        else:
            raise InvalidRequest(f"groupBy must be sandbox, team, day or metadata.<key>, "
                                 f"got {group_by[:40]!r}")
        today = day_of(self._clock.now())
        first = _day(since, "since") or today[:8] + "01"
        last = _day(until, "until") or today
        if first > last:
            raise InvalidRequest(f"since ({first}) is after until ({last})")
        rows = await self._meter.usage(UsageQuery(
            team_id=team.team_id, group_by=grouping, group_key=key, since=first, until=last,
            sandbox_id=sandbox_id, metadata=dict(metadata or {})))
        lines = [self._line(k, u) for k, u in rows]
        lines.sort(key=lambda line: (-line.cost, line.key))
        total = Usage.total(u for _, u in rows)
        return UsageReport(first, last, self._line("total", total), lines)

    async def sandbox(self, team: Team,
                      sandbox_id: str) -> tuple[SandboxRecord, UsageLine]:
        """One sandbox, live or ended, and its usage over its whole life."""
        record = await self._history.sandbox(team, sandbox_id)
        rows = await self._meter.usage(UsageQuery(team_id=team.team_id, group_by="sandbox",
                                                  sandbox_id=sandbox_id))
        return record, self._line(sandbox_id, Usage.total(u for _, u in rows))
