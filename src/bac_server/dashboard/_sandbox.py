"""A sandbox's page: what it is and does, one tab at a time.

``GET /ui/sandboxes/{id}?tab=`` ``trace`` (its trace as a timeline: lifecycle, each
command with its duration and exit code, each transfer with its size, errors and
pauses), ``processes`` (list, kill one), ``terminal`` (:mod:`._terminal`), ``desktop``
(its screen, live: :mod:`._desktop`), ``files``
(list, download, upload), ``network`` (egress policy, edited in place, counters and
destination log: :mod:`._network`), ``metrics`` (CPU and memory over its life, drawn in the
browser from ``metrics.json``), ``cost`` and ``checkpoints``. An ended sandbox keeps its
trace, metrics and cost; what needs it running says so. Every lookup goes through the
viewer's scope: another team's sandbox is a 404 on every tab and action.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from bac_server.backends.dialing import dialer_of
from bac_server.control import (
    InvalidRequest,
    NotFound,
    SandboxState,
    Team,
    TraceFilter,
)
from bac_server.store import EventRecord, SandboxRecord

from ._context import human_bytes, render, settings
from ._desktop import desktop_csp, desktop_tab
from ._envd import Envd, EnvdError, envd_client
from ._guard import CSP, TERMINAL_CSP, acting, viewer
from ._network import network_tab
from ._scope import Viewer

TABS = ("trace", "processes", "terminal", "desktop", "files", "network", "metrics", "cost",
        "checkpoints")
_TRACE_LIMIT = 1000
_MAX_PATH = 4096


@dataclass(frozen=True)
class Item:
    """One line of the timeline."""

    at: datetime
    kind: str
    level: str
    title: str
    detail: str
    badge: str
    ok: bool | None
    # The end of a command's output (stdout, then stderr), as envd reported it.
    tail: str = ""


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def item_of(ev: EventRecord) -> Item:
    f = ev.fields
    if ev.kind == "process":
        code, signal = f.get("exit_code"), f.get("signal")
        badge = f"exit {code}" if code is not None else f"signal {signal}" if signal else "?"
        ms = _number(f.get("duration_ms"))
        detail = " · ".join(p for p in (
            f"{ms:.0f} ms" if ms is not None else "",
            f"out {human_bytes(_number(f.get('stdout_bytes')) or 0)}",
            f"err {human_bytes(_number(f.get('stderr_bytes')) or 0)}",
            f"as {f.get('user')}" if f.get("user") else "",
            "timed out" if f.get("timed_out") else "", "pty" if f.get("pty") else "") if p)
        tail = "".join(str(f.get(k) or "") for k in ("stdout_tail", "stderr_tail"))
        return Item(ev.at, "command", ev.level, str(f.get("cmd", ev.message)), detail, badge,
                    code == 0 if code is not None else False, tail.rstrip("\n"))
    if ev.kind == "transfer":
        ms = _number(f.get("duration_ms"))
        detail = " · ".join(p for p in (
            human_bytes(_number(f.get("bytes")) or 0),
            f"{ms:.0f} ms" if ms is not None else "", f"as {f.get('user')}" if f.get("user")
            else "") if p)
        return Item(ev.at, str(f.get("direction", "transfer")), ev.level,
                    str(f.get("path", "")), detail, f"HTTP {f.get('status', '?')}",
                    bool(f.get("ok")))
    shown = ("reason", "mode", "how", "total_ms", "duration_ms", "bytes", "end_at", "change")
    detail = " · ".join(f"{k} {f[k]}" for k in shown if f.get(k) not in (None, ""))
    return Item(ev.at, ev.kind, ev.level, ev.message, detail, "", None)


def _seconds(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds()


async def _head(view: Viewer, sid: str) -> dict[str, Any]:
    """The facts every tab shows, live or ended."""
    record, team = await view.record(sid)
    live = view.plane.registry.get(sid)
    if live is not None and not view.sees_team(live.team_id):
        live = None
    now = view.plane.clock.now()
    state = live.state.value if live is not None else record.state
    names = await view.plane.keys.team_names()
    return {"record": record, "team": team, "team_name": names.get(team.team_id, team.team_id),
            "live": live, "state": state, "running": state == SandboxState.RUNNING.value,
            "age": _seconds(record.started_at, now),
            "left": None if live is None or not live.has_end else _seconds(now, live.end_at),
            "sample": view.plane.sampler.latest(sid), "sid": sid, "tabs": TABS}


def _client(view: Viewer, sid: str, timeout: httpx.Timeout | None = None
            ) -> httpx.AsyncClient:
    return envd_client(dialer_of(view.plane.backend), sid, timeout)


def _envd(view: Viewer, sid: str, client: httpx.AsyncClient) -> Envd:
    route = view.plane.registry.route(sid)
    if route is None:
        raise InvalidRequest("the sandbox is not running: resume it first")
    return Envd(route, view.plane.registry, client)


async def _tab(view: Viewer, sid: str, tab: str, team: Team, record: SandboxRecord,
               request: Request) -> dict[str, Any]:
    plane = view.plane
    if tab == "trace":
        events = await plane.traces.sandbox(team, sid, TraceFilter.of(
            kinds=None, since=None, until=None, after_id=0, limit=_TRACE_LIMIT))
        return {"items": [item_of(e) for e in events]}
    if tab == "cost":
        if plane.usage is None:
            return {"cost": None}
        _, line = await plane.usage.sandbox(team, sid)
        caps = [] if plane.caps is None else plane.caps.covering(team, sid, record.metadata)
        return {"cost": line, "caps": caps, "currency": plane.prices.currency,
                "prices": plane.prices}
    if tab == "desktop":
        return await desktop_tab(view, plane.registry.get(sid), request)
    if tab == "network":
        live = plane.registry.get(sid)
        if live is None:
            return {"policy": None, "usage": None, "unavailable": "the sandbox has ended"}
        return await network_tab(view, live, team)
    if tab == "checkpoints":
        try:
            return {"checkpoints": await plane.checkpoints.timeline(team, sid)}
        except NotFound:
            return {"checkpoints": []}
    if tab in ("processes", "files"):
        if plane.registry.route(sid) is None:
            return {"unavailable": "the sandbox is not running"}
        async with _client(view, sid) as client:
            envd = _envd(view, sid, client)
            try:
                if tab == "processes":
                    return {"processes": await envd.processes()}
                path = _path(request.query_params.get("path") or "/home/user")
                return {"entries": await envd.list_dir(path), "path": path,
                        "parent": path.rstrip("/").rpartition("/")[0] or "/"}
            except EnvdError as exc:
                return {"unavailable": str(exc)}
    return {}


def _path(value: str) -> str:
    if not value.startswith("/") or len(value) > _MAX_PATH or "\x00" in value:
        raise InvalidRequest("a path must be absolute, at most 4096 characters")
    return value


async def sandbox_page(request: Request) -> Response:
    view = await viewer(request)
    sid: str = request.path_params["sandbox_id"]
    tab = request.query_params.get("tab", "trace")
    if tab not in TABS:
        raise InvalidRequest(f"tab must be one of {', '.join(TABS)}")
    head = await _head(view, sid)
    body = await _tab(view, sid, tab, head["team"], head["record"], request)
    page = render(request, "sandbox.html", view=view, tab=tab, nav="fleet", **head, **body)
    if tab == "terminal":
        page.headers["content-security-policy"] = TERMINAL_CSP
    if tab == "desktop" and body.get("origin"):
        page.headers["content-security-policy"] = desktop_csp(CSP, body["origin"])
    return page


async def metrics_json(request: Request) -> Response:
    """The sandbox's samples over its life, for the chart: unix seconds, CPU %, memory
    and disk used (bytes)."""
    view = await viewer(request)
    sid: str = request.path_params["sandbox_id"]
    _, team = await view.record(sid)
    samples = await view.plane.history.metrics(team, sid, None, None)
    return JSONResponse({
        "t": [round(s.at.timestamp(), 3) for s in samples],
        "cpu": [round(s.cpu_used_pct, 2) for s in samples],
        "mem": [s.mem_used for s in samples], "disk": [s.disk_used for s in samples]})


async def kill_process(request: Request) -> Response:
    view, _ = await acting(request)
    sid: str = request.path_params["sandbox_id"]
    view.sandbox(sid)
    raw: str = request.path_params["pid"]
    if not raw.isdigit() or not 0 < int(raw) < 1 << 22:
        raise InvalidRequest("pid must be a process id")
    async with _client(view, sid) as client:
        try:
            await _envd(view, sid, client).kill(int(raw))
        except EnvdError as exc:
            raise InvalidRequest(str(exc)) from exc
    return render(request, "_flash.html", kind="ok", message=f"killed process {raw}")


async def download(request: Request) -> Response:
    view = await viewer(request)
    sid: str = request.path_params["sandbox_id"]
    view.sandbox(sid)
    path = _path(request.query_params.get("path", ""))
    client = _client(view, sid, httpx.Timeout(30, read=None))
    envd = _envd(view, sid, client)
    try:
        answer = await client.send(envd.download(path), stream=True)
    except httpx.HTTPError as exc:
        await client.aclose()
        raise InvalidRequest(f"the sandbox's envd did not answer: {exc}") from exc
    if answer.status_code != 200:
        text = (await answer.aread())[:300].decode(errors="replace")
        await answer.aclose()
        await client.aclose()
        raise InvalidRequest(f"envd: {answer.status_code} {text}")

    async def body() -> Any:
        try:
            async for chunk in answer.aiter_raw():
                yield chunk
        finally:
            await answer.aclose()
            await client.aclose()

    name = path.rstrip("/").rpartition("/")[2] or "download"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:200]
    headers = {"Content-Disposition": f'attachment; filename="{safe}"'}
    if "content-length" in answer.headers:
        headers["Content-Length"] = answer.headers["content-length"]
    return StreamingResponse(body(), media_type="application/octet-stream", headers=headers)


async def upload(request: Request) -> Response:
    length = request.headers.get("content-length", "")
    limit = settings(request).max_upload_bytes
    if not length.isdigit() or int(length) > limit:
        raise InvalidRequest(f"an upload must say its length and be at most "
                             f"{limit >> 20} MiB")
    view, form = await acting(request, max_files=1, max_body_bytes=limit)
    sid: str = request.path_params["sandbox_id"]
    view.sandbox(sid)
    directory = form.get("path")
    file = form.get("file")
    if not isinstance(directory, str) or isinstance(file, str) or file is None \
            or not file.filename:
        raise InvalidRequest("choose a file and a directory")
    name = file.filename.replace("/", "_").replace("\x00", "")
    target = _path(directory.rstrip("/") + "/" + name)
    data = await file.read()
    async with _client(view, sid) as client:
        try:
            await _envd(view, sid, client).upload(target, name, data)
        except EnvdError as exc:
            raise InvalidRequest(str(exc)) from exc
    return render(request, "_flash.html", kind="ok",
                  message=f"uploaded {target} ({human_bytes(len(data))})")

