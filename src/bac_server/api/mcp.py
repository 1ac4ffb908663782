"""``/mcp``: the MCP endpoint over streamable HTTP (docs/agents.md).

It is :class:`bac.agents.mcp_server.HttpEndpoint`, the same MCP server as ``bac mcp``:
each request's API key (``X-API-KEY`` or ``Authorization: Bearer``) is checked here
against the team keys, as every REST route checks it (401 otherwise), and the tools then
act through the public SDK against this server's own API (``ServerConfig.self_url``)
with that key, so an MCP client can do exactly what the key can and nothing more.
"""

from __future__ import annotations

from starlette.routing import Route

from bac.agents.mcp_server import HttpEndpoint
from bac_server.control import ControlPlane, Unauthenticated

PATH = "/mcp"


class McpRoute:
    """The endpoint and its route; the plane is handed in once the lifespan made it."""

    def __init__(self, api_url: str) -> None:
        self._plane: ControlPlane | None = None
        self.endpoint = HttpEndpoint(api_url, self._authenticate)
        self.route = Route(PATH, endpoint=self.endpoint)

    def attach(self, plane: ControlPlane) -> None:
        self._plane = plane

    async def _authenticate(self, key: str) -> bool:
        if self._plane is None:  # not started yet, or stopping
            return False
        try:
            await self._plane.keys.authenticate(key)
        except Unauthenticated:
            return False
        return True
