"""Templates: the built-in ones and the viewer's teams' own, with their builds, and a
build's log. Another team's template or build is a 404, as on the API."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bac_server.control import NotFound, Team

from ._context import render
from ._guard import viewer

_LOG_LINES = 2000


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


async def build_page(request: Request) -> Response:
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
    logs = await catalog.logs(build.build_id, limit=_LOG_LINES)
    return render(request, "build.html", view=view, nav="templates", template=template,
                  build=build, logs=logs)
