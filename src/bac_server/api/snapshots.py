"""E2B's snapshot routes:

* ``POST   /sandboxes/{id}/snapshots``   201 ``SnapshotInfo`` (the sandbox keeps running)
* ``GET    /snapshots``                  ``[SnapshotInfo]``, newest first, ``X-Next-Token``
* ``DELETE /templates/{id}``             204, 404 when no such snapshot (templates built
  from recipes are not deleted through this API)

A snapshot id or name is accepted as ``templateID`` on create.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import checkpoint_views
from bac_server.api.body import read_model
from bac_server.api.context import plane, sandbox_id, settings, team
from bac_server.api.errors import error_response
from bac_server.api.models import SnapshotRequest
from bac_server.api.query import int_param, page_after


async def create(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, SnapshotRequest, settings(request).max_body_bytes)
    rec = await plane(request).snapshots.create(caller, sandbox_id(request), name=body.name,
                                                memory=body.memory is not False)
    return JSONResponse(checkpoint_views.snapshot(rec), 201)


async def listing(request: Request) -> Response:
    caller = await team(request)
    query = request.query_params
    limit = int_param(query, "limit", default=100, low=1, high=100) or 100
    found = await plane(request).snapshots.listing(caller, sandbox_id=query.get("sandboxID"),
                                                   name=query.get("name"))
    page, headers = page_after(found, lambda s: s.checkpoint_id, query, limit)
    return JSONResponse([checkpoint_views.snapshot(s) for s in page], headers=headers)


async def delete(request: Request) -> Response:
    caller = await team(request)
    ref: str = request.path_params["template_id"]
    if not await plane(request).snapshots.delete(caller, ref):
        return error_response(404, f"template or snapshot {ref!r} not found")
    return Response(status_code=204)
