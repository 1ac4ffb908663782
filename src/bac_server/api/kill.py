"""``DELETE /sandboxes/{id}``: 204 once every resource is released; 404 when unknown."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bac_server.api.context import plane, sandbox_id, team


async def kill_sandbox(request: Request) -> Response:
    caller = await team(request)
    await plane(request).lifecycle.kill(caller, sandbox_id(request))
    return Response(status_code=204)
