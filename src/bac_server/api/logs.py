"""``GET /sandboxes/{id}/logs`` and ``GET /v2/sandboxes/{id}/logs``: the sandbox's event log
(created, started, timeout changes, connect, kill, timeout, ...), also after it ended."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.context import plane, sandbox_id, team
from bac_server.api.query import choice_param, epoch_param, int_param

_LEVELS = ("debug", "info", "warn", "error")
_MAX_LIMIT = 10_000


async def logs_v1(request: Request) -> Response:
    caller = await team(request)
    params = request.query_params
    since = epoch_param(params, "start", millis=True)
    limit = int_param(params, "limit", default=1000, low=0, high=_MAX_LIMIT) or 0
    events = await plane(request).history.events(
        caller, sandbox_id(request), since=since, limit=limit
    )
    return JSONResponse(
        {
            "logs": [views.log_line(e) for e in events],
            "logEntries": [views.log_entry(e) for e in events],
        }
    )


async def logs_v2(request: Request) -> Response:
    caller = await team(request)
    params = request.query_params
    since = epoch_param(params, "cursor", millis=True)
    limit = int_param(params, "limit", default=1000, low=0, high=_MAX_LIMIT) or 0
    backward = choice_param(params, "direction", ("forward", "backward")) == "backward"
    level = choice_param(params, "level", _LEVELS)
    search = params.get("search") or None
    events = await plane(request).history.events(
        caller, sandbox_id(request), since=None if backward else since, limit=_MAX_LIMIT,
        newest_first=backward,
    )
    if backward and since is not None:
        events = [e for e in events if e.at <= since]
    if level is not None:
        floor = _LEVELS.index(level)
        events = [e for e in events if _LEVELS.index(_level(e.level)) >= floor]
    if search is not None:
        events = [e for e in events if search in e.message]
    return JSONResponse({"logs": [views.log_entry(e) for e in events[:limit]]})


def _level(value: str) -> str:
    return value if value in _LEVELS else "info"
