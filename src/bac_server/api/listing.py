"""``GET /v2/sandboxes`` (filters, order, ``limit`` + ``X-Next-Token`` pagination) and
``GET /sandboxes`` (v1: every running sandbox of the team, metadata filter only)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.context import plane, settings, team
from bac_server.api.list_query import parse_list_query
from bac_server.control import ListQuery, SandboxState, page


async def list_v2(request: Request) -> Response:
    caller = await team(request)
    query = parse_list_query(request.query_params, paginated=True)
    items, next_token = page(plane(request).registry.visible(caller), query)
    version = settings(request).envd_version
    headers = {"X-Next-Token": next_token} if next_token else {}
    return JSONResponse([views.listed(s, envd_version=version) for s in items], headers=headers)


async def list_v1(request: Request) -> Response:
    caller = await team(request)
    parsed = parse_list_query(request.query_params, paginated=False)
    query = ListQuery(metadata=parsed.metadata, states=frozenset({SandboxState.RUNNING}),
                      limit=10**9)
    items, _ = page(plane(request).registry.visible(caller), query)
    version = settings(request).envd_version
    return JSONResponse([views.listed(s, envd_version=version) for s in items])
