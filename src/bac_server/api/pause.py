"""``POST /sandboxes/{id}/pause``: 204; 409 when already paused.

``{"memory": false}`` (E2B ``mode="filesystem"``) keeps the files only; otherwise the
whole state is saved (see ``control.pausing`` for which pause that is on this host).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bac_server.api.body import read_model
from bac_server.api.context import plane, sandbox_id, settings, team
from bac_server.api.models import PauseRequest


async def pause_sandbox(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, PauseRequest, settings(request).max_body_bytes)
    await plane(request).lifecycle.pause(caller, sandbox_id(request),
                                         memory=body.memory is not False)
    return Response(status_code=204)
