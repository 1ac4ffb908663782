"""Bac's checkpoint routes (not part of E2B's API):

* ``POST   /sandboxes/{id}/checkpoints``                 take one (201 Checkpoint)
* ``GET    /sandboxes/{id}/checkpoints``                 the timeline, oldest first
* ``POST   /sandboxes/{id}/checkpoints/{cid}/restore``   roll back to it (200 Sandbox)
* ``DELETE /sandboxes/{id}/checkpoints/{cid}``           204
* ``PUT    /sandboxes/{id}/checkpoints/schedule``        every N seconds, keep K (204)
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import checkpoint_views, views
from bac_server.api.body import read_model
from bac_server.api.context import plane, sandbox_id, settings, team
from bac_server.api.models import CheckpointRequest, ScheduleRequest


def _checkpoint_id(request: Request) -> str:
    value: str = request.path_params["checkpoint_id"]
    return value


async def take(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, CheckpointRequest, settings(request).max_body_bytes)
    rec = await plane(request).checkpoints.take(caller, sandbox_id(request), name=body.name,
                                                memory=body.memory is not False)
    return JSONResponse(checkpoint_views.checkpoint(rec), 201)


async def timeline(request: Request) -> Response:
    caller = await team(request)
    found = await plane(request).checkpoints.timeline(caller, sandbox_id(request))
    return JSONResponse([checkpoint_views.checkpoint(c) for c in found])


async def restore(request: Request) -> Response:
    caller = await team(request)
    await read_model(request, CheckpointRequest, settings(request).max_body_bytes)
    sbx = await plane(request).checkpoints.restore(caller, sandbox_id(request),
                                                   _checkpoint_id(request))
    conf = settings(request)
    return JSONResponse(views.sandbox(sbx, envd_version=conf.envd_version, domain=conf.domain))


async def delete(request: Request) -> Response:
    caller = await team(request)
    await plane(request).checkpoints.delete(caller, sandbox_id(request), _checkpoint_id(request))
    return Response(status_code=204)


async def schedule(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, ScheduleRequest, settings(request).max_body_bytes)
    await plane(request).checkpoints.schedule(caller, sandbox_id(request),
                                              body.intervalSeconds, body.keep)
    return Response(status_code=204)
