"""A sandbox's desktop stream: ``POST /sandboxes/{id}/streams`` (a Bac extension).

Body ``{"port"?: 6080, "ttl"?: seconds}``; answers 201 ``{"port", "token", "expiresAt",
"url"}``: a stream token for that port of the sandbox (:mod:`bac_server.control.streams`)
and the noVNC viewer's URL through the gateway, ``{scheme}://{port}-{id}.{domain}/vnc.html``
with the token as ``bac_stream`` (for the page; the gateway turns it into a cookie) and in
noVNC's WebSocket ``path`` (for a viewer served from elsewhere). 400 for a port that is not
a stream port or a lifetime out of bounds; 404 for another team's or an ended sandbox.
"""

from __future__ import annotations

from pydantic import StrictInt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.body import Strict, read_model
from bac_server.api.context import plane, public_domain, sandbox_id, settings, team
from bac_server.api.views import rfc3339_unix
from bac_server.control import InvalidRequest
from bac_server.control.streams import viewer_url

DEFAULT_PORT = 6080


class StreamRequest(Strict):
    port: StrictInt = DEFAULT_PORT
    ttl: StrictInt | None = None


def _viewer_url(request: Request, sid: str, port: int, token: str) -> str:
    """The noVNC page through this server's gateway, by host name."""
    return viewer_url(request.url.scheme, public_domain(request), sid, port, token)


async def issue_stream(request: Request) -> Response:
    caller = await team(request)
    conf = settings(request)
    body = await read_model(request, StreamRequest, conf.max_body_bytes)
    sid = sandbox_id(request)
    sbx = plane(request).registry.owned(caller, sid)
    streams = conf.streams
    if body.port not in streams.ports:
        ports = ", ".join(map(str, sorted(streams.ports))) or "none"
        raise InvalidRequest(f"port {body.port} is not a stream port (stream ports: {ports})")
    try:
        issued = streams.issue(sbx.sandbox_id, sbx.envd_access_token, body.port, body.ttl)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from exc
    return JSONResponse({
        "port": issued.port,
        "token": issued.token,
        "expiresAt": rfc3339_unix(issued.expires_at),
        "url": _viewer_url(request, sbx.sandbox_id, issued.port, issued.token),
    }, status_code=201)
