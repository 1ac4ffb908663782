"""Templates: request a build, list, get, change visibility, delete.

* ``POST   /v3/templates``                202 ``TemplateRequestResponseV3`` (a new build of the
  team's template of that name, made when missing)
* ``GET    /templates``, ``/v2/templates``  ``[Template]``: the team's, the public ones and the
  built-ins (v2 pages with ``limit``/``nextToken`` and ``X-Next-Token``)
* ``GET    /templates/{id}``              ``TemplateWithBuilds`` (builds newest first)
* ``PATCH  /templates/{id}``, ``/v2/...``  ``{"public": bool}`` → ``{"names": [...]}``
* ``DELETE /templates/{id}``              204: a template of the team (its builds cancelled;
  sandboxes from it keep running), else a snapshot; 404 when neither
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import templates_views as views
from bac_server.api.body import read_model
from bac_server.api.context import plane, settings, team
from bac_server.api.errors import BadRequest, error_response
from bac_server.api.query import int_param, page_after
from bac_server.api.templates_context import template_ref, templates
from bac_server.api.templates_models import TemplateBuildRequest, TemplateUpdate
from bac_server.control import InvalidRequest
from bac_server.control.templates import builtin_name


async def request_build(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, TemplateBuildRequest, settings(request).max_body_bytes)
    if body.teamID is not None and body.teamID not in (caller.team_id, caller.name):
        raise BadRequest("teamID must be your own team (the API key's)")
    name = body.name or body.alias
    if name is None:
        raise BadRequest("missing required field 'name'")
    if body.minFreeDiskMb is not None and body.minFreeDiskMb < 0:
        raise BadRequest(f"minFreeDiskMb must not be negative, got {body.minFreeDiskMb}")
    template, build = await templates(request).catalog.request_build(
        caller, name, tags=body.tags or [], cpu_count=body.cpuCount, memory_mb=body.memoryMB)
    return JSONResponse(views.build_requested(template, build), 202)


async def _listing(request: Request) -> list[dict[str, Any]]:
    caller = await team(request)
    services, conf = templates(request), settings(request)
    limits = plane(request).limits
    found = [views.builtin(b, limits=limits, envd_version=conf.envd_version)
             for b in await services.resolver.builtins()]
    found += [views.template(s, limits=limits, envd_version=conf.envd_version)
              for s in await services.catalog.summaries(caller)]
    return found


async def list_v1(request: Request) -> Response:
    return JSONResponse(await _listing(request))


async def list_v2(request: Request) -> Response:
    query = request.query_params
    limit = int_param(query, "limit", default=100, low=1, high=100) or 100
    found = await _listing(request)
    page, headers = page_after(found, lambda t: str(t["templateID"]), query, limit)
    return JSONResponse(list(page), headers=headers)


async def get_template(request: Request) -> Response:
    caller = await team(request)
    services, conf = templates(request), settings(request)
    limits = plane(request).limits
    query = request.query_params
    limit = int_param(query, "limit", default=100, low=1, high=100) or 100
    builtin = builtin_name(template_ref(request))
    for known in await services.resolver.builtins() if builtin is not None else []:
        if known.name == builtin:
            return JSONResponse({**views.builtin(known, limits=limits,
                                                 envd_version=conf.envd_version),
                                 "builds": []})
    found = await services.catalog.visible(caller, template_ref(request))
    body = views.template(await services.catalog.summary(found), limits=limits,
                          envd_version=conf.envd_version)
    builds = await services.catalog.builds(found) if found.team_id == caller.team_id else []
    page, headers = page_after(builds, lambda b: b.build_id, query, limit)
    body["builds"] = [views.build(b, limits=limits, envd_version=conf.envd_version)
                      for b in page]
    return JSONResponse(body, headers=headers)


async def update(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, TemplateUpdate, settings(request).max_body_bytes)
    catalog = templates(request).catalog
    if body.public is None:
        found = await catalog.owned(caller, template_ref(request))
    else:
        found = await catalog.set_public(caller, template_ref(request), body.public)
    return JSONResponse({"names": views.names(found)})


async def delete(request: Request) -> Response:
    caller = await team(request)
    ref = template_ref(request)
    try:
        if await templates(request).delete(caller, ref) is not None:
            return Response(status_code=204)
    except InvalidRequest:
        pass  # not a template name at all: maybe a snapshot's
    if await plane(request).snapshots.delete(caller, ref):
        return Response(status_code=204)
    return error_response(404, f"template or snapshot {ref!r} not found")
