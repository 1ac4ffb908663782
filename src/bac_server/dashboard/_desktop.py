"""A desktop sandbox's Desktop tab: its screen, live, in the page.

The viewer is noVNC as the sandbox itself serves it (its websockify on the stream port),
framed from the sandbox's own origin (``6080-<id>.<domain>``) through the gateway with a
stream token this server signs for the viewer, as ``POST /sandboxes/{id}/streams`` does:
nothing from the sandbox runs in Mission Control's origin, and no password is involved.
Opening the tab starts the stream inside when it is not running (``bac_protocol.desktop``);
a sandbox without a desktop says so.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from bac_protocol.desktop import NO_DESKTOP, START_STREAM, STREAM_PORT
from bac_server.backends.dialing import dialer_of
from bac_server.config import sandbox_domain
from bac_server.control import LiveSandbox, SandboxState
from bac_server.control.streams import viewer_url

from ._context import settings
from ._envd import Envd, EnvdError, envd_client
from ._scope import Viewer


def desktop_csp(base: str, origin: str) -> str:
    """The page's policy with the viewer's origin allowed as a frame."""
    return base.replace("default-src 'none';", f"default-src 'none'; frame-src {origin};")


async def desktop_tab(view: Viewer, sbx: LiveSandbox | None, request: Request) -> dict[str, Any]:
    """The viewer's URL (and origin), or why there is none."""
    if sbx is None or sbx.state is not SandboxState.RUNNING:
        return {"viewer": None, "unavailable": "the sandbox is not running: resume it first"}
    route = view.plane.registry.route(sbx.sandbox_id)
    if route is None:
        return {"viewer": None, "unavailable": "the sandbox is not running: resume it first"}
    async with envd_client(dialer_of(view.plane.backend), route.sandbox_id) as client:
        try:
            code, said = await Envd(route, view.plane.registry, client).run(START_STREAM)
        except EnvdError as exc:
            return {"viewer": None, "unavailable": str(exc)}
    if code == NO_DESKTOP:
        return {"viewer": None, "unavailable": "this sandbox has no desktop (create one from "
                                               "the desktop template)"}
    if code != 0:
        return {"viewer": None, "unavailable": f"the stream did not start: {said}"}
    conf = settings(request)
    issued = conf.streams.issue(sbx.sandbox_id, sbx.envd_access_token, STREAM_PORT)
    domain = sandbox_domain(conf.domain, request.url.scheme, request.url.port)
    url = viewer_url(request.url.scheme, domain, sbx.sandbox_id, STREAM_PORT, issued.token,
                     framed=True)
    origin = f"{request.url.scheme}://{STREAM_PORT}-{sbx.sandbox_id}.{domain}"
    return {"viewer": url, "origin": origin, "unavailable": None}
