"""What the fleet shows of money: each sandbox's spend to date, today's spend, the caps.

Read from the meter's reports (one grouped query per team, not one per sandbox) and kept
for a few seconds per team, so a fleet refreshed live costs the store at most one read
of each team every ``_FRESH_S`` seconds, however many viewers and changes there are.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from starlette.requests import Request

from bac_server.control import Team
from bac_server.control.metering import LiveCap, day_of

from ._scope import Viewer

_FRESH_S = 3.0
_EPOCH = "2000-01-01"


@dataclass(frozen=True)
class TeamSpend:
    by_sandbox: dict[str, float]
    today: float
    at: float


@dataclass
class Spend:
    available: bool
    by_sandbox: dict[str, float] = field(default_factory=dict)
    today: float | None = None
    # The tightest cap covering each sandbox (its limit), and each team cap's figures.
    caps: dict[str, float] = field(default_factory=dict)
    team_caps: list[tuple[str, float, float]] = field(default_factory=list)
    team_names: dict[str, str] = field(default_factory=dict)


async def _team_spend(request: Request, view: Viewer, team: Team) -> TeamSpend:
    cache: dict[str, TeamSpend] = request.app.state.spend_cache
    hit = cache.get(team.team_id)
    now = time.monotonic()
    if hit is not None and now - hit.at < _FRESH_S:
        return hit
    reports = view.plane.usage
    assert reports is not None
    lifetime = await reports.report(team, group_by="sandbox", since=_EPOCH)
    today = day_of(view.plane.clock.now())
    daily = await reports.report(team, group_by="team", since=today, until=today)
    found = TeamSpend({line.key: line.cost for line in lifetime.lines}, daily.total.cost, now)
    cache[team.team_id] = found
    return found


def _cap_text(cap: LiveCap, names: dict[str, str]) -> str:
    record = cap.record
    if record.scope == "team":
        return f"team {names.get(record.team_id, record.team_id)} ({record.period})"
    if record.scope == "group":
        return f"{record.metadata_key}={record.metadata_value} ({record.period})"
    return f"sandbox {record.sandbox_id} ({record.period})"


async def spend_of(request: Request, view: Viewer) -> Spend:
    names: dict[str, str] = await view.plane.keys.team_names()
    if view.plane.usage is None:
        return Spend(available=False, team_names=names)
    spend = Spend(available=True, today=0.0, team_names=names)
    caps = view.plane.caps
    live = {s.sandbox_id: s for s in view.sandboxes()}
    for team in view.teams():
        part = await _team_spend(request, view, team)
        spend.by_sandbox.update({k: v for k, v in part.by_sandbox.items() if k in live})
        spend.today = (spend.today or 0.0) + part.today
        if caps is None:
            continue
        for cap in caps.of_team(team):
            if cap.record.scope != "sandbox":
                spend.team_caps.append((_cap_text(cap, names), cap.spent, cap.record.amount))
            for sbx in live.values():
                if cap.covers(sbx.sandbox_id, sbx.team_id, sbx.metadata):
                    left = spend.caps.get(sbx.sandbox_id)
                    if left is None or cap.record.amount < left:
                        spend.caps[sbx.sandbox_id] = cap.record.amount
    return spend
