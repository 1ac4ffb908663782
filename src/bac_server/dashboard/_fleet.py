"""The fleet: every sandbox the viewer may see, one row each, filtered, sorted, totalled.

``GET /ui/fleet`` is the page; ``GET /ui/fleet/rows`` the table's body and totals alone,
which the page fetches again whenever the live feed (:mod:`._live`) says something it
shows changed, and every few seconds for the samples (CPU, memory, disk). A row reads the
registry, the sampler's last sample and the spend (:mod:`._spend`): no store query per
row. The table shows one page of the sorted, filtered fleet (``page``, ``per``): the
totals count them all, and only the page's rows are rendered, so a refresh costs the
same at a thousand sandboxes as at a hundred.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bac_server.config import sandbox_domain
from bac_server.control import NO_END, InvalidRequest, LiveSandbox, OnTimeout, SandboxState

from ._context import PREFIX, render, settings
from ._guard import viewer
from ._scope import Viewer
from ._spend import Spend, spend_of

_STATES = ("running", "paused")
_SORTS = ("age", "id", "state", "template", "team", "cpu", "memory", "disk", "procs", "ports",
          "egress", "spend", "left")
_MAX_TEXT = 200
PER_PAGE = 100
_PER_PAGE_CHOICES = (10, 25, 50, 100, 200, 500)


@dataclass(frozen=True)
class Filters:
    state: str = ""
    template: str = ""
    team: str = ""
    metadata: tuple[str, str] | None = None
    search: str = ""
    sort: str = "age"
    descending: bool = False
    selected: frozenset[str] = field(default_factory=frozenset)
    page: int = 1
    per: int = PER_PAGE

    @classmethod
    def parse(cls, params: QueryParams) -> Filters:
        def text(name: str) -> str:
            value = params.get(name, "").strip()
            if len(value) > _MAX_TEXT:
                raise InvalidRequest(f"{name} is longer than {_MAX_TEXT} characters")
            return value

        state = text("state")
        if state and state not in _STATES:
            raise InvalidRequest(f"state must be one of {', '.join(_STATES)}")
        sort = text("sort") or "age"
        if sort not in _SORTS:
            raise InvalidRequest(f"sort must be one of {', '.join(_SORTS)}")
        pair = None
        raw = text("metadata")
        if raw:
            key, sep, value = raw.partition("=")
            if not sep or not key.strip():
                raise InvalidRequest("metadata must be key=value")
            pair = (key.strip(), value.strip())
        selected = frozenset(v for v in params.getlist("ids")[:5000] if len(v) <= 64)
        page = _number(text("page"), "page", 1)
        if page < 1:
            raise InvalidRequest("page must be 1 or more")
        per = _number(text("per"), "per", PER_PAGE)
        if per not in _PER_PAGE_CHOICES:
            raise InvalidRequest(
                f"per must be one of {', '.join(str(n) for n in _PER_PAGE_CHOICES)}")
        return cls(state, text("template"), text("team"), pair, text("q"), sort,
                   params.get("order") == "desc", selected, page, per)

    def keep(self, sbx: LiveSandbox) -> bool:
        if self.state and sbx.state.value != self.state:
            return False
        if self.template and self.template not in (sbx.template_id, sbx.alias):
            return False
        if self.team and sbx.team_id != self.team:
            return False
        if self.metadata is not None and sbx.metadata.get(self.metadata[0]) != self.metadata[1]:
            return False
        return not self.search or self.search.lower() in sbx.sandbox_id.lower()


def _number(value: str, name: str, default: int) -> int:
    if not value:
        return default
    if not value.isdigit() or len(value) > 6:
        raise InvalidRequest(f"{name} must be a whole number")
    return int(value)


@dataclass(frozen=True)
class Page:
    """Which slice of the matching rows the table shows (1-based, inclusive)."""

    number: int
    pages: int
    first: int  # 0 when nothing matches
    last: int
    per: int


@dataclass(frozen=True)
class Row:
    sandbox_id: str
    team: str
    key: str | None  # the name of the API key that created it
    template: str
    state: str
    held: str | None
    metadata: dict[str, str]
    age_s: float
    left_s: float | None  # None: no end
    policy: str
    cpu_pct: float | None
    mem_used: int | None
    mem_total: int
    disk_used: int | None
    spend: float | None
    cap: float | None
    selected: bool
    processes: int | None
    ports: tuple[int, ...]
    egress_out: int | None  # bytes sent over its link (None: not sampled yet)
    egress_in: int | None
    destinations: tuple[tuple[str, bool], ...]  # the last few, newest first: (where, allowed)


@dataclass(frozen=True)
class Totals:
    shown: int
    running: int
    paused: int
    rate_per_h: float
    spend: float | None
    today: float | None
    caps: list[tuple[str, float, float]]  # (what, spent, limit)
    currency: str


def _policy(sbx: LiveSandbox) -> str:
    parts = []
    parts.append("pause at end" if sbx.on_timeout is OnTimeout.PAUSE else "kill at end")
    if sbx.idle_after_s:
        parts.append(f"idle {sbx.idle_action.value} after {sbx.idle_after_s}s")
    if sbx.auto_resume:
        parts.append("auto-resume")
    return ", ".join(parts)


def _row(view: Viewer, sbx: LiveSandbox, spend: Spend, now: datetime,
         filters: Filters) -> Row:
    running = sbx.state is SandboxState.RUNNING
    sample = view.plane.sampler.latest(sbx.sandbox_id) if running else None
    usage = view.plane.sampler.latest_usage(sbx.sandbox_id) if running else None
    return Row(
        sandbox_id=sbx.sandbox_id, team=spend.team_names.get(sbx.team_id, sbx.team_id),
        key=sbx.key_name,
        template=sbx.alias or sbx.template_id, state=sbx.state.value, held=sbx.held,
        metadata=dict(sbx.metadata), age_s=(now - sbx.started_at).total_seconds(),
        left_s=None if sbx.end_at >= NO_END else (sbx.end_at - now).total_seconds(),
        policy=_policy(sbx),
        cpu_pct=None if sample is None else sample.cpu_used_pct,
        mem_used=None if sample is None else sample.mem_used,
        mem_total=sbx.memory_mb << 20,
        disk_used=None if sample is None else sample.disk_used,
        spend=spend.by_sandbox.get(sbx.sandbox_id), cap=spend.caps.get(sbx.sandbox_id),
        selected=sbx.sandbox_id in filters.selected,
        processes=None if usage is None else usage.processes,
        ports=() if usage is None else usage.listening_ports,
        egress_out=None if usage is None else usage.net_bytes_out,
        egress_in=None if usage is None else usage.net_bytes_in,
        destinations=() if usage is None else usage.recent_destinations)


def _sort_key(sort: str) -> object:
    keys = {
        "age": lambda r: r.age_s, "id": lambda r: r.sandbox_id, "state": lambda r: r.state,
        "template": lambda r: r.template, "team": lambda r: r.team,
        "cpu": lambda r: r.cpu_pct or 0.0, "memory": lambda r: r.mem_used or 0,
        "disk": lambda r: r.disk_used or 0, "spend": lambda r: r.spend or 0.0,
        "procs": lambda r: r.processes or 0, "ports": lambda r: len(r.ports),
        "egress": lambda r: r.egress_out or 0,
        "left": lambda r: float("inf") if r.left_s is None else r.left_s,
    }
    return keys[sort]


async def _table(request: Request, view: Viewer) -> dict[str, object]:
    filters = Filters.parse(request.query_params)
    now = view.plane.clock.now()
    every = view.sandboxes()
    spend = await spend_of(request, view)
    shown = [s for s in every if filters.keep(s)]
    rows = [_row(view, s, spend, now, filters) for s in shown]
    rows.sort(key=_sort_key(filters.sort), reverse=filters.descending)  # type: ignore[arg-type]
    pages = max(1, -(-len(rows) // filters.per))
    number = min(filters.page, pages)  # past the end (rows went away): the last page
    start = (number - 1) * filters.per
    paged = rows[start:start + filters.per]
    page = Page(number, pages, start + 1 if paged else 0, start + len(paged), filters.per)
    prices = view.plane.prices
    running = [s for s in every if s.state is SandboxState.RUNNING]
    rate = sum(s.cpu_count * prices.vcpu_second + (s.memory_mb / 1024) * prices.memory_gib_second
               for s in running) * 3600
    totals = Totals(
        shown=len(rows), running=len(running),
        paused=sum(1 for s in every if s.state is SandboxState.PAUSED), rate_per_h=rate,
        spend=None if not spend.available else sum(spend.by_sandbox.get(s.sandbox_id, 0.0)
                                                    for s in every),
        today=spend.today, caps=spend.team_caps, currency=prices.currency)
    templates = sorted({s.alias or s.template_id for s in every})
    teams = sorted({s.team_id for s in every})
    hosts = sandbox_domain(settings(request).domain, request.url.scheme, request.url.port)
    return {"rows": paged, "page": page, "per_choices": _PER_PAGE_CHOICES,
            "totals": totals, "filters": filters, "templates": templates,
            "hosts": hosts, "scheme": request.url.scheme,
            "teams": [(t, spend.team_names.get(t, t)) for t in teams], "view": view,
            "states": _STATES}


async def home(request: Request) -> Response:
    await viewer(request)
    return RedirectResponse(f"{PREFIX}/fleet", 303)


async def fleet_page(request: Request) -> Response:
    view = await viewer(request)
    return render(request, "fleet.html", **await _table(request, view))


async def fleet_rows(request: Request) -> Response:
    view = await viewer(request)
    return render(request, "_fleet_rows.html", **await _table(request, view))
