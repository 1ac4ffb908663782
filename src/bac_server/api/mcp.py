"""``/mcp``: the MCP endpoint over streamable HTTP (docs/agents.md).

It is :class:`bac.agents.mcp_server.HttpEndpoint`, the same MCP server as ``bac mcp``:
each request's API key (``X-API-KEY`` or ``Authorization: Bearer``) is checked there
against the team keys, as every REST route checks it (401 otherwise), and the tools then
act through the public SDK against this server's own API (``ServerConfig.self_url``)
with that key, so an MCP client can do exactly what the key can and nothing more.

The MCP library is loaded at the first request to ``/mcp``, not at start: its import is
a sixth of a server's start (some 0.4 s of CPU) and most servers never serve MCP. The
endpoint then runs in a task of its own (its sessions' task group) until the app stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bac_server.control import ControlPlane, Unauthenticated

if TYPE_CHECKING:
    from bac.agents.mcp_server import HttpEndpoint

PATH = "/mcp"
_MODULE = "bac.agents.mcp_server"
_log = logging.getLogger(__name__)


class McpRoute:
    """The endpoint's route; the plane is handed in once the lifespan made it, and the
    endpoint is served within ``running``."""

    def __init__(self, api_url: str) -> None:
        self._api_url = api_url
        self._plane: ControlPlane | None = None
        self._wanted = asyncio.Event()
        self._endpoint: asyncio.Future[HttpEndpoint] | None = None
        self.route = Route(PATH, endpoint=self)  # an ASGI app: an object, not a function

    def attach(self, plane: ControlPlane) -> None:
        self._plane = plane

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve the endpoint (loaded at its first request) until the app stops."""
        self._endpoint = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._serve(self._endpoint))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if not self._endpoint.done():
                self._endpoint.set_exception(RuntimeError("the server is stopping"))
            self._endpoint.exception()  # retrieved: nobody may be waiting for it
            self._endpoint = None

    async def _serve(self, endpoint: asyncio.Future[HttpEndpoint]) -> None:
        await self._wanted.wait()
        try:
            module = await asyncio.to_thread(importlib.import_module, _MODULE)
            made: HttpEndpoint = module.HttpEndpoint(self._api_url, self._authenticate)
        except Exception as exc:
            _log.exception("the MCP endpoint could not be loaded")
            endpoint.set_exception(exc)
            return
        async with made.running():
            endpoint.set_result(made)
            await asyncio.Event().wait()  # until the app stops (cancelled)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._endpoint is None:  # not started yet, or stopping
            await _answer(send, 503, "the server is not serving yet")
            return
        self._wanted.set()
        try:
            endpoint = await asyncio.shield(self._endpoint)
        except Exception as exc:
            await _answer(send, 503, f"the MCP endpoint is unavailable: {exc}")
            return
        await endpoint(scope, receive, send)

    async def _authenticate(self, key: str) -> bool:
        if self._plane is None:  # not started yet, or stopping
            return False
        try:
            await self._plane.keys.authenticate(key)
        except Unauthenticated:
            return False
        return True


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"code": status, "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
