"""The dashboard as one Starlette application (mounted at ``/ui``), every page and action
in one table, and the front door the server's root answers with."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from . import (
    _actions,
    _catalog,
    _checkpoints,
    _fleet,
    _live,
    _network,
    _runs,
    _sandbox,
    _signin,
    _terminal,
)
from ._context import HERE, PREFIX, DashboardSettings, environment
from ._guard import HANDLERS, SecurityHeaders
from ._sessions import Sessions

_GET = ["GET"]
_POST = ["POST"]
_ID = "/sandboxes/{sandbox_id:str}"

ROUTES: list[BaseRoute] = [
    Route("/", _fleet.home, methods=_GET),
    Route("/signin", _signin.signin_page, methods=_GET),
    Route("/signin", _signin.signin, methods=_POST),
    Route("/signout", _signin.signout, methods=_POST),
    Route("/fleet", _fleet.fleet_page, methods=_GET),
    Route("/fleet/rows", _fleet.fleet_rows, methods=_GET),
    Route("/fleet/events", _live.fleet_events, methods=_GET),
    Route("/fleet/actions", _actions.fleet_actions, methods=_POST),
    Route("/fleet/switch", _actions.kill_switch, methods=_POST),
    Route(_ID, _sandbox.sandbox_page, methods=_GET),
    Route(_ID + "/metrics.json", _sandbox.metrics_json, methods=_GET),
    Route(_ID + "/files/download", _sandbox.download, methods=_GET),
    Route(_ID + "/files/upload", _sandbox.upload, methods=_POST),
    Route(_ID + "/processes/{pid:str}/kill", _sandbox.kill_process, methods=_POST),
    Route(_ID + "/checkpoints", _checkpoints.take, methods=_POST),
    Route(_ID + "/checkpoints/{checkpoint_id:str}/restore", _checkpoints.restore,
          methods=_POST),
    Route(_ID + "/fork", _checkpoints.fork, methods=_POST),
    Route(_ID + "/network", _network.update, methods=_POST),
    WebSocketRoute(_ID + "/terminal", _terminal.terminal_socket),
    Route(_ID + "/{action:str}", _actions.sandbox_action, methods=_POST),
    Route("/runs", _runs.runs_page, methods=_GET),
    Route("/templates", _catalog.templates_page, methods=_GET),
    Route("/templates/{template_id:str}/builds/{build_id:str}", _catalog.build_page,
          methods=_GET),
    Route("/templates/{template_id:str}/builds/{build_id:str}/log", _catalog.build_log,
          methods=_GET),
    Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
]


def build_dashboard(settings: DashboardSettings) -> Starlette:
    """The dashboard; the server's lifespan sets ``state.plane`` once the plane runs."""
    app = Starlette(routes=ROUTES, middleware=[Middleware(SecurityHeaders)],
                    exception_handlers=dict(HANDLERS))  # type: ignore[arg-type]
    app.state.plane = None
    app.state.settings = settings
    app.state.sessions = Sessions(idle_s=settings.session_idle_s,
                                  max_s=settings.session_max_s)
    app.state.jinja = environment()
    app.state.spend_cache = {}
    return app


async def front_door(request: Request) -> Response:
    """``/``: a browser (it asks for HTML) is sent to Mission Control; anything else gets
    the API's JSON 404, as before there was a dashboard."""
    if request.method in ("GET", "HEAD") and "text/html" in request.headers.get("accept", ""):
        return RedirectResponse(f"{PREFIX}/", 302)
    raise HTTPException(404)


def front_routes(dashboard: Starlette) -> list[BaseRoute]:
    """What the server's root serves for the dashboard: ``/`` and ``/ui/...``."""
    every = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    return [Route("/", front_door, methods=every), Mount(PREFIX, app=dashboard)]
