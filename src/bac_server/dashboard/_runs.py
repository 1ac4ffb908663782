"""Runs: sandboxes grouped by the value of a metadata key the viewer chooses (``run_id``
by default), each group with its live sandboxes by state, and its usage and cost this
month (ended sandboxes included: the meter's report grouped by that key, per team)."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response

from bac_server.control import InvalidRequest, SandboxState

from ._context import render
from ._guard import viewer

_MAX_KEY = 256


@dataclass
class Run:
    value: str
    running: int = 0
    paused: int = 0
    teams: set[str] = field(default_factory=set)
    vcpu_seconds: float = 0.0
    cost: float = 0.0

    @property
    def outcome(self) -> str:
        if self.running:
            return "running"
        return "paused" if self.paused else "ended"


def _key(request: Request) -> str:
    key = request.query_params.get("key", "run_id").strip() or "run_id"
    if len(key) > _MAX_KEY or not all(c.isalnum() or c in "_.-" for c in key):
        raise InvalidRequest("a metadata key is ASCII letters, digits and _ . -")
    return key


async def runs_page(request: Request) -> Response:
    view = await viewer(request)
    key = _key(request)
    runs: dict[str, Run] = {}
    live = view.sandboxes()
    for sbx in live:
        value = sbx.metadata.get(key)
        if value is None:
            continue
        run = runs.setdefault(value, Run(value))
        run.teams.add(sbx.team_id)
        if sbx.state is SandboxState.RUNNING:
            run.running += 1
        elif sbx.state is SandboxState.PAUSED:
            run.paused += 1
    usage = view.plane.usage
    if usage is not None:
        for team in view.teams():
            report = await usage.report(team, group_by=f"metadata.{key}")
            for line in report.lines:
                if not line.key:
                    continue  # sandboxes without the key
                run = runs.setdefault(line.key, Run(line.key))
                run.teams.add(team.team_id)
                run.vcpu_seconds += line.usage.vcpu_seconds
                run.cost += line.cost
    keys = sorted({k for s in live for k in s.metadata} | {key})
    names = await view.plane.keys.team_names()
    ordered = sorted(runs.values(), key=lambda r: (-r.running - r.paused, -r.cost, r.value))
    return render(request, "runs.html", view=view, nav="runs", key=key, keys=keys,
                  runs=ordered, names=names, currency=view.plane.prices.currency,
                  metered=usage is not None)
