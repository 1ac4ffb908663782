"""A team's templates: request a build, list, get, change visibility, delete.

* ``POST   /v3/templates``                202 ``TemplateRequestResponseV3`` (a new build of the
  team's template of that name, made when missing)
* ``GET    /templates``, ``/v2/templates``  ``[Template]``: the team's, the public ones and the
  built-ins (v2 pages with ``limit``/``nextToken`` and ``X-Next-Token``)
* ``GET    /templates/{id}``              ``TemplateWithBuilds`` (builds newest first)
* ``PATCH  /templates/{id}``, ``/v2/...``  ``{"public": bool}`` → ``{"names": [...]}``
* ``DELETE /templates/{id}``              204: a template of the team (its builds cancelled;
  sandboxes from it keep running), else a snapshot; 404 when neither

Every key the SDK's generated models require is always present in the bodies answered.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import StrictBool, StrictInt, StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.body import Name, Strict, read_model
from bac_server.api.context import plane, settings, team, template_ref, templates
from bac_server.api.errors import BadRequest
from bac_server.api.query import int_param, page_after
from bac_server.api.views import rfc3339
from bac_server.control import Limits
from bac_server.control.templates import (
    BUILTIN_MEMORY_MB,
    Builtin,
    TemplateSummary,
    builtin_name,
)
from bac_server.store import BuildRecord, TemplateRecord

from ._builds import build_body, reason_body

_BUILTIN_BUILDS = uuid.UUID("6f3c1a56-5a3e-4b8e-9c0e-bac0bac0bac0")


class TemplateBuildRequest(Strict):
    """``POST /v3/templates`` (``TemplateBuildRequestV3``)."""

    name: Name | None = None
    tags: list[StrictStr] | None = None
    alias: Name | None = None  # deprecated spelling of ``name``
    teamID: StrictStr | None = None
    cpuCount: StrictInt | None = None
    memoryMB: StrictInt | None = None
    minFreeDiskMb: StrictInt | None = None


class TemplateUpdate(Strict):
    """``PATCH /templates/{templateID}`` and ``PATCH /v2/templates/{templateID}``."""

    public: StrictBool | None = None


def _names(template: TemplateRecord) -> list[str]:
    return [template.name, *template.aliases]


def _build_requested(template: TemplateRecord, build: BuildRecord) -> dict[str, Any]:
    """``TemplateRequestResponseV3``."""
    return {"templateID": template.template_id, "buildID": build.build_id,
            "public": template.public, "names": _names(template), "tags": list(build.tags),
            "aliases": _names(template)}


def _template(summary: TemplateSummary, *, limits: Limits, envd_version: str) -> dict[str, Any]:
    """``Template``: the build serving it is its ``default`` tag's (else newest ready);
    ``reason`` (Bac's): why its newest build failed, when it did."""
    t = summary.template
    shown = summary.serving or summary.latest
    latest = summary.latest
    failed = {"reason": reason_body(latest)} if latest is not None and latest.reason else {}
    return {
        "templateID": t.template_id,
        "buildID": shown.build_id if shown is not None else "",
        "cpuCount": t.cpu_count or limits.default_cpu_count,
        "memoryMB": t.memory_mb or limits.default_memory_mb,
        "diskSizeMB": t.disk_mb or limits.default_disk_mb,
        "public": t.public,
        "aliases": _names(t),
        "names": _names(t),
        "createdAt": rfc3339(t.created_at),
        "updatedAt": rfc3339(t.updated_at),
        "createdBy": None,
        "lastSpawnedAt": None if t.last_spawned_at is None else rfc3339(t.last_spawned_at),
        "spawnCount": t.spawn_count,
        "buildCount": t.build_count,
        "envdVersion": envd_version,
        "buildStatus": summary.latest.status if summary.latest is not None else "waiting",
        **failed,
    }


def _builtin(found: Builtin, *, limits: Limits, envd_version: str) -> dict[str, Any]:
    """A built-in template as a ``Template``: public, owned by no team."""
    at = rfc3339(found.built_at)
    every = [found.name, *found.aliases]
    return {
        "templateID": found.name,
        "buildID": str(uuid.uuid5(_BUILTIN_BUILDS, found.image.rootfs.parent.name)),
        "cpuCount": limits.default_cpu_count,
        "memoryMB": min(BUILTIN_MEMORY_MB.get(found.name, limits.default_memory_mb),
                        limits.max_memory_mb),
        "diskSizeMB": limits.default_disk_mb, "public": True, "aliases": every,
        "names": every, "createdAt": at, "updatedAt": at, "createdBy": None,
        "lastSpawnedAt": None, "spawnCount": 0, "buildCount": 1,
        "envdVersion": envd_version, "buildStatus": "ready",
    }


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
    return JSONResponse(_build_requested(template, build), 202)


async def _listing(request: Request) -> list[dict[str, Any]]:
    caller = await team(request)
    services, conf = templates(request), settings(request)
    limits = plane(request).limits
    found = [_builtin(b, limits=limits, envd_version=conf.envd_version)
             for b in await services.resolver.builtins()]
    found += [_template(s, limits=limits, envd_version=conf.envd_version)
              for s in await services.catalog.summaries(caller)]
    return found


async def list_templates_v1(request: Request) -> Response:
    return JSONResponse(await _listing(request))


async def list_templates_v2(request: Request) -> Response:
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
            return JSONResponse({**_builtin(known, limits=limits,
                                            envd_version=conf.envd_version),
                                 "builds": []})
    found = await services.catalog.visible(caller, template_ref(request))
    body = _template(await services.catalog.summary(found), limits=limits,
                     envd_version=conf.envd_version)
    builds = await services.catalog.builds(found) if found.team_id == caller.team_id else []
    page, headers = page_after(builds, lambda b: b.build_id, query, limit)
    body["builds"] = [build_body(b, limits=limits, envd_version=conf.envd_version)
                      for b in page]
    return JSONResponse(body, headers=headers)


async def update_template(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, TemplateUpdate, settings(request).max_body_bytes)
    catalog = templates(request).catalog
    if body.public is None:
        found = await catalog.owned(caller, template_ref(request))
    else:
        found = await catalog.set_public(caller, template_ref(request), body.public)
    return JSONResponse({"names": _names(found)})


async def delete_template(request: Request) -> Response:
    caller = await team(request)
    await plane(request).delete_template(caller, template_ref(request))
    return Response(status_code=204)
