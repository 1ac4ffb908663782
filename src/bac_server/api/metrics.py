"""``GET /sandboxes/{id}/metrics`` (samples in ``[start, end]``, unix seconds) and
``GET /sandboxes/metrics?sandbox_ids=a,b`` (the latest sample of each)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.context import plane, sandbox_id, team
from bac_server.api.errors import BadRequest
from bac_server.api.query import epoch_param
from bac_server.control import NotFound

_MAX_IDS = 100


async def sandbox_metrics(request: Request) -> Response:
    caller = await team(request)
    start = epoch_param(request.query_params, "start")
    end = epoch_param(request.query_params, "end")
    if start is not None and end is not None and start > end:
        raise BadRequest("start must not be after end")
    samples = await plane(request).history.metrics(caller, sandbox_id(request), start, end)
    return JSONResponse([views.metric(s) for s in samples])


async def many_metrics(request: Request) -> Response:
    caller = await team(request)
    raw = request.query_params.get("sandbox_ids", "")
    ids = [i for i in raw.split(",") if i]
    if not ids:
        raise BadRequest("sandbox_ids is required: a comma-separated list of sandbox ids")
    if len(ids) > _MAX_IDS:
        raise BadRequest(f"sandbox_ids lists {len(ids)} ids, the limit is {_MAX_IDS}")
    found: dict[str, Any] = {}
    for sid in ids:
        try:
            samples = await plane(request).history.metrics(caller, sid, None, None)
        except NotFound:
            continue
        if samples:
            found[sid] = views.metric(samples[-1])
    return JSONResponse({"sandboxes": found})
