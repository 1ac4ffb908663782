"""The terminal: xterm.js in the page, a login shell on a PTY in the sandbox, and this
WebSocket between them, which the server relays to envd's process RPCs (:mod:`._envd`).

The browser holds neither the API key nor the envd token: the socket is opened with the
session cookie (SameSite=Strict), only from this server's own pages (``Origin`` checked:
browsers do not apply CORS to WebSockets), and its first message must carry the session's
CSRF token. Binary messages are keystrokes, text messages JSON resizes (``{"rows",
"cols"}``); the shell's output comes back as binary messages. When either side ends,
the other is ended too: the shell is killed when the page goes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging

from starlette.websockets import WebSocket, WebSocketDisconnect

from bac_server.backends.dialing import dialer_of
from bac_server.control import ControlError

from ._context import sessions
from ._envd import Envd, EnvdError, envd_client
from ._guard import DashboardError, same_origin, token_matches, viewer

log = logging.getLogger(__name__)

_FIRST_MESSAGE_S = 10.0
_MAX_INPUT = 64 << 10
# Close codes (4000-4999 are the application's): the page says why.
_NOT_FOUND, _REFUSED, _ENDED = 4404, 4403, 4000


def _size(value: object, low: int, high: int, default: int) -> int:
    return value if isinstance(value, int) and low <= value <= high else default


async def terminal_socket(websocket: WebSocket) -> None:
    try:
        if not same_origin(websocket) or websocket.headers.get("origin") is None:
            raise DashboardError("not from this server's pages")
        view = await viewer(websocket)
        sid: str = websocket.path_params["sandbox_id"]
        view.sandbox(sid)
        route = view.plane.registry.route(sid)
    except (DashboardError, ControlError):
        await websocket.close(code=_NOT_FOUND)
        return
    await websocket.accept()
    if route is None:
        await websocket.close(code=_ENDED, reason="the sandbox is not running")
        return
    try:
        async with asyncio.timeout(_FIRST_MESSAGE_S):
            first = json.loads(await websocket.receive_text())
    except (TimeoutError, ValueError, WebSocketDisconnect, KeyError):
        await websocket.close(code=_REFUSED, reason="no opening message")
        return
    if not isinstance(first, dict) or not token_matches(view.csrf, first.get("csrf")):
        await websocket.close(code=_REFUSED, reason="the CSRF token is missing or wrong")
        return
    rows = _size(first.get("rows"), 2, 500, 24)
    cols = _size(first.get("cols"), 2, 1000, 80)
    table = sessions(websocket)
    async with envd_client(dialer_of(view.plane.backend), route.sandbox_id) as client:
        envd = Envd(route, view.plane.registry, client)
        pid: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def output() -> None:
            async for message in envd.terminal(rows, cols):
                event = message.get("event", {})
                if "start" in event and not pid.done():
                    pid.set_result(int(event["start"].get("pid", 0)))
                data = event.get("data", {}).get("pty")
                if data:
                    await websocket.send_bytes(base64.b64decode(data))
                if "end" in event:
                    return

        async def keys() -> None:
            started = await pid
            while table.alive(view.session):
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("bytes") is not None:
                    data: bytes = message["bytes"]
                    if data and len(data) <= _MAX_INPUT:
                        await envd.send_input(started, data)
                elif message.get("text") is not None:
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        size = json.loads(message["text"])
                        await envd.resize(started, _size(size.get("rows"), 2, 500, rows),
                                          _size(size.get("cols"), 2, 1000, cols))

        reading = asyncio.create_task(output())
        typing = asyncio.create_task(keys())
        try:
            done, _ = await asyncio.wait({reading, typing}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    error = task.exception()
                    if not isinstance(error, EnvdError | WebSocketDisconnect):
                        log.warning("terminal of %s: %r", sid, error)
        finally:
            for task in (reading, typing):
                task.cancel()
            await asyncio.gather(reading, typing, return_exceptions=True)
            if pid.done():
                with contextlib.suppress(EnvdError):
                    await envd.kill(pid.result())  # the shell goes with its page
        with contextlib.suppress(RuntimeError):
            await websocket.close(code=_ENDED, reason="the terminal ended")
