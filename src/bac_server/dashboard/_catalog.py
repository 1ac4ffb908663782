"""Templates: the built-in ones and the viewer's teams' own, with their builds, and a
build's log, followed live while the build runs (the page asks for the lines after the
last it has, every second, until the build has ended). Another team's template or build
is a 404, as on the API."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bac_server.control import InvalidRequest, NotFound, Team

from ._context import render
from ._guard import viewer

_LOG_LINES = 2000
# Statuses after which a build's log grows no more.
_ENDED = ("ready", "error")
# htmx stops polling on this answer (the last lines are in it).
_STOP_POLLING = 286


async def templates_page(request: Request) -> Response:
    view = await viewer(request)
    services = view.plane.templates
    builtins = await services.resolver.builtins()
    names = await view.plane.keys.team_names()
    teams = [view.principal.team] if view.principal.team is not None \
        else [Team(t, n) for t, n in sorted(names.items())]
    owned = []
    for team in teams:
        for summary in await services.catalog.summaries(team):
            if summary.template.team_id == team.team_id:
                builds = await services.catalog.builds(summary.template)
                owned.append((summary, builds[:10]))
    return render(request, "templates.html", view=view, nav="templates", builtins=builtins,
                  owned=owned, names=names)


async def _build(request: Request) -> tuple[Any, Any, Any]:
    view = await viewer(request)
    template_id: str = request.path_params["template_id"]
    build_id: str = request.path_params["build_id"]
    catalog = view.plane.templates.catalog
    team = view.principal.team
    if team is None:
        found = await catalog.by_id(template_id)
        if found is None:
            raise NotFound(f"template {template_id!r} not found")
        team = Team(found.team_id, found.team_id)
    template, build = await catalog.build_of(team, template_id, build_id)
    return view, template, build


async def build_page(request: Request) -> Response:
    view, template, build = await _build(request)
    logs = await view.plane.templates.catalog.logs(build.build_id, limit=_LOG_LINES)
    return render(request, "build.html", view=view, nav="templates", template=template,
                  build=build, logs=logs, live=build.status not in _ENDED,
                  after=logs[-1].seq + 1 if logs else 0)


async def build_log(request: Request) -> Response:
    """The log lines from ``after`` on (and the build's status), for the page to append;
    answered with htmx's stop-polling status once the build has ended."""
    view, _, build = await _build(request)
    raw = request.query_params.get("after", "0")
    if not raw.isdigit() or len(raw) > 12:
        raise InvalidRequest("after must be a line number")
    logs = await view.plane.templates.catalog.logs(build.build_id, offset=int(raw),
                                                   limit=_LOG_LINES)
    ended = build.status in _ENDED
    after = logs[-1].seq + 1 if logs else int(raw)
    return render(request, "_build_log.html", _STOP_POLLING if ended else 200, logs=logs,
                  build=build, after=after, live=not ended)
