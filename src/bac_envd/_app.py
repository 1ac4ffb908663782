"""The ASGI application: access-token check, then dispatch to routes or the RPC services.

Auth (E2B envd rule): when a token is set, every request must carry it in
``X-Access-Token`` except ``GET /health``, ``GET|POST /files`` (they accept a signature
instead, checked in ``transfer``) and ``POST /init``. Bac tightens ``/init``: once a token
is set, re-initialising requires that token, so code inside the sandbox cannot take over
envd by calling ``/init`` itself.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from bac_envd import _routes
from bac_envd._http import Receive, Scope, Send, header, send_connect_error, send_error
from bac_envd._rpc import RpcServices
from bac_envd._state import EnvdState

Route = Callable[[Scope, Receive, Send, EnvdState], Awaitable[None]]

UNAUTHORIZED = (
    "unauthorized access, please provide a valid access token or method signing if supported"
)
_RPC_PREFIXES = ("/process.Process/", "/filesystem.Filesystem/")
# What a Connect client calls: /<package>.<Service>/<Method>.
_PROCEDURE = re.compile(r"/[A-Za-z_][\w.]*\.[A-Za-z_]\w*/[A-Za-z_]\w*")
_ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "/health"): _routes.health,
    ("POST", "/init"): _routes.init,
    ("GET", "/envs"): _routes.envs,
    ("GET", "/metrics"): _routes.metrics,
}
_OPEN = {("GET", "/health"), ("GET", "/files"), ("POST", "/files")}


class EnvdApp:
    def __init__(self, state: EnvdState, rpc: RpcServices) -> None:
        self.state = state
        self.rpc = rpc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method: str = scope["method"]
        path: str = scope["path"]
        key = (method, path)
        if key not in _OPEN and not self.state.token_matches(header(scope, "x-access-token")):
            await send_error(send, 401, UNAUTHORIZED)
            return
        if path.startswith(_RPC_PREFIXES) or _PROCEDURE.fullmatch(path):
            app = await self.rpc.app_for(path) if path.startswith(_RPC_PREFIXES) else None
            if app is None:
                # Connect's answer to a procedure the server does not have.
                await send_connect_error(send, 404, "unimplemented",
                                         f"envd serves no procedure {path}")
                return
            await app(scope, receive, send)
            return
        route = _ROUTES.get(key)
        if route is not None:
            await route(scope, receive, send, self.state)
            return
        if path == "/files" and method in ("GET", "POST"):
            from bac_envd.transfer import handle_files

            await handle_files(scope, receive, send, self.state)
            return
        if any(p == path for _, p in _ROUTES) or path == "/files":
            await send_error(send, 405, f"method {method} not allowed on {path}")
            return
        await send_error(send, 404, f"no route for {path}")
