"""``POST /sandboxes/{id}/timeout`` (set the end, may shorten; 0 ends now) and
``POST /sandboxes/{id}/refreshes`` (keep-alive: extend only). Both answer 204."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bac_server.api.body import read_model
from bac_server.api.context import plane, sandbox_id, settings, team
from bac_server.api.models import RefreshRequest, TimeoutRequest
from bac_server.control import EventKind


async def set_timeout(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, TimeoutRequest, settings(request).max_body_bytes)
    await plane(request).lifecycle.set_timeout(caller, sandbox_id(request), body.timeout)
    return Response(status_code=204)


async def refresh(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, RefreshRequest, settings(request).max_body_bytes)
    control = plane(request)
    seconds = control.limits.default_timeout_s if body.duration is None else body.duration
    await control.lifecycle.extend(
        caller, sandbox_id(request), seconds, EventKind.TIMEOUT_SET, what="duration"
    )
    return Response(status_code=204)
