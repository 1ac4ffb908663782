"""The server's front door: requests for a sandbox go to the gateway, the rest to the API.

One address serves both, because the SDKs point ``E2B_API_URL`` and ``E2B_SANDBOX_URL`` at
the same server; the routing headers or host name tell them apart (:mod:`.routing`), and a
signed ``/files`` URL is routed by its signature (:mod:`.signed`).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from bac_server.gateway.errors import NOT_FOUND, error_body, send_error
from bac_server.gateway.proxy import Gateway
from bac_server.gateway.routing import RoutingError, Target, target_of
from bac_server.gateway.signed import is_signed_files_request
from bac_server.gateway.websocket_relay import deny


class GatewaySlot:
    """Where the server's lifespan puts the gateway it builds: the dispatcher is made before
    it (the ASGI app must exist for its lifespan to run), and routes to sandboxes only while
    a gateway is in."""

    def __init__(self, gateway: Gateway | None = None) -> None:
        self._gateway = gateway

    @property
    def gateway(self) -> Gateway | None:
        return self._gateway

    def attach(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def detach(self) -> None:
        self._gateway = None


class Dispatcher:
    def __init__(self, api: ASGIApp, domain: str, gateways: GatewaySlot) -> None:
        self._api = api
        self._domain = domain
        self._gateways = gateways

    @property
    def api(self) -> ASGIApp:
        """The REST API behind it (its ``state.plane`` is the control plane once the
        lifespan started)."""
        return self._api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gateway = self._gateways.gateway
        if scope["type"] in ("http", "websocket") and gateway is not None:
            try:
                target = target_of(scope["headers"], self._domain)
            except RoutingError as exc:
                if scope["type"] == "websocket":
                    await receive()
                    await deny(scope, send, 400, error_body(400, str(exc), None))
                else:
                    await send_error(send, 400, str(exc), None)
                return
            if target is None and is_signed_files_request(scope):
                route = await gateway.signer(scope)
                if route is None:
                    await send_error(send, 502, NOT_FOUND, None)
                    return
                target = Target(route.sandbox_id, route.envd_port)
            if target is not None:
                await gateway(scope, receive, send, target)
                return
        await self._api(scope, receive, send)
