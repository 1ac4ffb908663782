"""Template names and tags.

* ``GET    /templates/aliases/{alias}``  200 ``{"templateID","public"}`` for a built-in, one of
  the team's templates or a public one; 404 otherwise (``Template.exists`` is False). Names
  are per team, so another team's private template is simply not there: never a 403.
* ``POST   /templates/tags``             201 ``{"tags","buildID"}``: ``target`` is
  ``name:tag`` (``name`` = its ``default`` tag); its build gets ``tags`` too
* ``DELETE /templates/tags``             204: ``{"name","tags"}``; 404 if it had none of them
* ``GET    /templates/{id}/tags``        ``[{"tag","buildID","createdAt"}]``
"""

from __future__ import annotations

from typing import Any

from pydantic import StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.body import Name, Strict, read_model
from bac_server.api.context import settings, team, template_ref, templates
from bac_server.api.errors import error_response
from bac_server.api.views import rfc3339
from bac_server.control.templates import builtin_name, split_ref
from bac_server.store import TagRecord


class AssignTags(Strict):
    """``POST /templates/tags``: point ``tags`` at the build ``target`` (``name:tag``) is."""

    target: Name
    tags: list[StrictStr]


class DeleteTags(Strict):
    """``DELETE /templates/tags``."""

    name: Name
    tags: list[StrictStr]


def _tag(t: TagRecord) -> dict[str, Any]:
    """``TemplateTag``."""
    return {"tag": t.tag, "buildID": t.build_id, "createdAt": rfc3339(t.created_at)}


async def get_alias(request: Request) -> Response:
    caller = await team(request)
    name: str = request.path_params["alias"]
    builtin = builtin_name(name)
    if builtin is not None and any(b.name == builtin
                                   for b in await templates(request).resolver.builtins()):
        return JSONResponse({"templateID": builtin, "public": True})
    # A tag is not part of the name: ``exists("app:v1")`` asks whether ``app`` is there.
    found = await templates(request).catalog.find(caller, split_ref(name)[0])
    if found is None:
        return error_response(404, f"template {name!r} not found")
    return JSONResponse({"templateID": found.template_id, "public": found.public})


async def assign_tags(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, AssignTags, settings(request).max_body_bytes)
    build_id, tags = await templates(request).catalog.assign_tags(caller, body.target,
                                                                  body.tags)
    return JSONResponse({"tags": tags, "buildID": build_id}, 201)


async def remove_tags(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, DeleteTags, settings(request).max_body_bytes)
    await templates(request).catalog.remove_tags(caller, body.name, body.tags)
    return Response(status_code=204)


async def list_tags(request: Request) -> Response:
    caller = await team(request)
    found = await templates(request).catalog.tags(caller, template_ref(request))
    return JSONResponse([_tag(t) for t in found])
