"""E2B's lifecycle events API: ``GET /events/sandboxes`` (the team's events) and
``GET /events/sandboxes/{sandboxID}`` (one sandbox's; another team's is a 404). Query:
``offset`` (≥ 0), ``limit`` (1 to 100, default 10), ``orderAsc`` (default false: newest
first), ``types`` (repeated: any of them). Answers a JSON array of events."""

from __future__ import annotations

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.context import plane, sandbox_id, team
from bac_server.api.query import choice_param, int_param
from bac_server.control import NotSupported
from bac_server.control.events import DEFAULT_LIMIT, MAX_LIMIT, EventQuery, EventServices


def services(request: Request) -> EventServices:
    found = plane(request).events
    if found is None:
        raise NotSupported("this server has no events API")
    return found


def bool_param(params: QueryParams, name: str, default: bool) -> bool:
    raw = choice_param(params, name, ("true", "false"))
    return default if raw is None else raw == "true"


def _query(params: QueryParams) -> EventQuery:
    return EventQuery(
        offset=int_param(params, "offset", default=0, low=0, high=1_000_000) or 0,
        limit=int_param(params, "limit", default=DEFAULT_LIMIT, low=1,
                        high=MAX_LIMIT) or DEFAULT_LIMIT,
        ascending=bool_param(params, "orderAsc", False),
        types=tuple(t for t in params.getlist("types") if t))


async def team_events(request: Request) -> Response:
    caller = await team(request)
    query = _query(request.query_params)
    return JSONResponse(await services(request).events.of_team(caller, query))


async def sandbox_events(request: Request) -> Response:
    caller = await team(request)
    query = _query(request.query_params)
    return JSONResponse(await services(request).events.of_team(caller, query,
                                                              sandbox_id(request)))
