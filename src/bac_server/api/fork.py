"""``POST /sandboxes/{id}/fork`` (E2B): 201, one ``{"sandbox": Sandbox}`` or
``{"error": {"code", "message"}}`` per requested fork; the source keeps running."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.body import read_model
from bac_server.api.context import plane, sandbox_id, settings, team
from bac_server.api.errors import status_of
from bac_server.api.models import ForkRequest
from bac_server.control import LiveSandbox


async def fork(request: Request) -> Response:
    caller = await team(request)
    conf = settings(request)
    body = await read_model(request, ForkRequest, conf.max_body_bytes)
    results = await plane(request).snapshots.fork(
        caller, sandbox_id(request), count=1 if body.count is None else body.count,
        timeout_s=body.timeout)
    items = [
        {"sandbox": views.sandbox(r, envd_version=conf.envd_version, domain=conf.domain)}
        if isinstance(r, LiveSandbox) else
        {"error": {"code": status_of(r), "message": str(r)}}
        for r in results
    ]
    return JSONResponse(items, 201)
