"""``GET /sandboxes/{id}``: 200 ``SandboxDetail``; 404 for an unknown, ended or foreign one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.context import plane, sandbox_id, settings, team


async def get_sandbox(request: Request) -> Response:
    caller = await team(request)
    conf = settings(request)
    sbx = plane(request).registry.owned(caller, sandbox_id(request))
    return JSONResponse(views.detail(sbx, envd_version=conf.envd_version, domain=conf.domain))
