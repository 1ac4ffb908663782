"""Builds of a template: start, status with logs, logs (also live), cancel.

* ``POST   /v2/templates/{id}/builds/{buildID}``         202: the steps; the build is queued
* ``GET    /templates/{id}/builds/{buildID}/status``     ``TemplateBuildInfo``; query
  ``logsOffset`` (lines already seen), ``limit`` (≤ 100, the SDK's page), ``level`` (lowest)
* ``GET    /templates/{id}/builds/{buildID}/logs``       ``{"logs": [BuildLogEntry]}``; query
  ``cursor`` (unix ms), ``limit``, ``direction``, ``level``; Bac: ``follow=true`` streams
  every line as NDJSON (one ``BuildLogEntry`` per line) until the build ends
* ``DELETE /templates/{id}/builds/{buildID}``            Bac: cancel (status error, "cancelled")
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from bac_server.api import templates_views as views
from bac_server.api.body import read_model
from bac_server.api.context import settings, team
from bac_server.api.query import choice_param, epoch_param, int_param
from bac_server.api.templates_context import build_ref, template_ref, templates
from bac_server.api.templates_models import TemplateBuildStart
from bac_server.api.templates_recipe import to_recipe

LEVELS = ("debug", "info", "warn", "error")
MAX_PAGE = 100
_REASON_LINES = 20


def _levels(request: Request) -> list[str] | None:
    level = choice_param(request.query_params, "level", LEVELS)
    return None if level is None else list(LEVELS[LEVELS.index(level):])


async def trigger(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, TemplateBuildStart, settings(request).max_body_bytes)
    recipe = to_recipe(body)
    await templates(request).builds.trigger(caller, template_ref(request), build_ref(request),
                                            recipe)
    return Response(status_code=202)


async def status(request: Request) -> Response:
    caller = await team(request)
    query = request.query_params
    offset = int_param(query, "logsOffset", default=0, low=0, high=1 << 31) or 0
    limit = int_param(query, "limit", default=MAX_PAGE, low=0, high=MAX_PAGE)
    levels = _levels(request)
    services = templates(request)
    _template, build = await services.catalog.build_of(caller, template_ref(request),
                                                       build_ref(request))
    # The build was read first: a finished build's lines are all in the store already.
    entries = await services.catalog.logs(build.build_id, offset=offset,
                                          limit=MAX_PAGE if limit is None else limit,
                                          levels=levels)
    last = []
    if build.status == "error":
        last = await services.catalog.logs(build.build_id, limit=_REASON_LINES,
                                           newest_first=True)
    return JSONResponse(views.build_status(build, entries, last[::-1]))


async def logs(request: Request) -> Response:
    caller = await team(request)
    query = request.query_params
    follow = choice_param(query, "follow", ("true", "false")) == "true"
    limit = int_param(query, "limit", default=MAX_PAGE, low=0, high=MAX_PAGE)
    backward = choice_param(query, "direction", ("forward", "backward")) == "backward"
    choice_param(query, "source", ("temporary", "persistent"))  # both are the same log here
    since = epoch_param(query, "cursor", millis=True)
    levels = _levels(request)
    services = templates(request)
    _template, build = await services.catalog.build_of(caller, template_ref(request),
                                                       build_ref(request))
    if follow:
        return StreamingResponse(_follow(request, build.build_id, levels),
                                 media_type="application/x-ndjson",
                                 headers={"Cache-Control": "no-store"})
    entries = await services.catalog.logs(build.build_id, since=since, levels=levels,
                                          limit=MAX_PAGE if limit is None else limit,
                                          newest_first=backward)
    return JSONResponse({"logs": [views.log_entry(e) for e in entries]})


async def _follow(request: Request, build_id: str,
                  levels: list[str] | None) -> AsyncIterator[bytes]:
    async for entry in templates(request).builds.follow(build_id, levels=levels):
        yield json.dumps(views.log_entry(entry)).encode() + b"\n"


async def cancel(request: Request) -> Response:
    caller = await team(request)
    await templates(request).builds.cancel(caller, template_ref(request), build_ref(request))
    return Response(status_code=204)
