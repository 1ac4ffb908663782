"""The gateway: checks a request bound for a sandbox, then relays it (HTTP or WebSocket).

Checks, in order: the sandbox is running (else 502 "was not found", which the SDKs read as
"sandbox gone"; a paused sandbox with auto-resume is resumed first, through ``waker``);
envd's internal routes are not reachable from outside (403); a stream port (a desktop's
noVNC) needs a stream token for that sandbox and port (403; :mod:`.streams`); other
non-envd ports of a sandbox created with ``allowPublicTraffic: false`` need its traffic
token (403). The envd access token itself is checked by envd, which also accepts signed
URLs without it.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

from starlette.types import Message, Receive, Scope, Send

from bac_server.backends.dialing import DIRECT, Dialer, NotRunningThere
from bac_server.control import Registry, Route
from bac_server.control.streams import StreamTokens
from bac_server.control.telemetry import Telemetry
from bac_server.gateway.errors import (
    BAD_TRAFFIC_HEADER,
    NO_TRAFFIC_HEADER,
    NOT_FOUND,
    PORT_CLOSED,
    error_body,
    send_error,
)
from bac_server.gateway.http_relay import HttpRelay, UpstreamFailed
from bac_server.gateway.metering import Metered
from bac_server.gateway.pool import Pool
from bac_server.gateway.routing import Target
from bac_server.gateway.signed import signer_of
from bac_server.gateway.streams import REFUSALS, StreamPass, check_stream, with_cookie
from bac_server.gateway.websocket_relay import deny, relay_websocket

log = logging.getLogger(__name__)

# envd routes meant for the host only (E2B's proxy refuses them from outside too).
INTERNAL_ENVD_PATHS = frozenset({"init", "freeze", "unfreeze", "collapse", "fsfreeze", "fsthaw"})
_TRAFFIC_HEADER = b"e2b-traffic-access-token"


def is_internal_path(raw_path: bytes) -> bool:
    """True for envd's internal routes however the path is spelled (case, %xx, //, /./)."""
    try:
        path = unquote(raw_path.decode("ascii"), errors="strict")
    except (UnicodeError, ValueError):
        return True  # cannot tell what the sandbox would route it to: fail closed
    segments = [s for s in path.split("/") if s not in ("", ".")]
    return bool(segments) and segments[0].lower() in INTERNAL_ENVD_PATHS


class Gateway:
    def __init__(self, registry: Registry, pool: Pool | None = None, *,
                 waker: Callable[[str], Awaitable[Route | None]] | None = None,
                 telemetry: Telemetry | None = None,
                 streams: StreamTokens | None = None, dialer: Dialer = DIRECT,
                 catch_up: Callable[[], Awaitable[None]] | None = None,
                 recheck: Callable[[str], Awaitable[Route | None]] | None = None) -> None:
        """``dialer``: how connections to sandboxes open (through their node, when several
        machines run them); the pool's when one is given. Of several replicas:
        ``catch_up`` learns the running sandboxes made through the others and not yet
        announced here (a signed URL names no sandbox: its signer may be one of them);
        ``recheck`` reads a sandbox's state again when its machine said it does not run
        there (another replica paused it an instant ago), resuming it if paused with
        auto-resume, and gives its route, if any: the request is then relayed once more."""
        self._registry = registry
        self._catch_up = catch_up
        self._recheck = recheck
        self._dialer = dialer
        self._streams = streams or StreamTokens()
        self._telemetry = telemetry
        self._waker = waker
        self._pool = pool or Pool(dialer=dialer)
        self._http = HttpRelay(self._pool)
        registry.on_gone(self._pool.drop_sandbox)

    def close(self) -> None:
        self._pool.close()

    def routes(self) -> list[Route]:
        return self._registry.routes()

    async def signer(self, scope: Scope) -> Route | None:
        """The running sandbox whose token signed this ``/files`` request, if any; looked
        for again among the sandboxes of the other replicas when none here signed it."""
        route = signer_of(scope, self.routes())
        if route is None and self._catch_up is not None:
            await self._catch_up()
            route = signer_of(scope, self.routes())
        return route

    def _refusal(self, scope: Scope, route: Route, target: Target) -> tuple[int, str] | None:
        if target.port == route.envd_port:
            raw: bytes = scope.get("raw_path") or scope["path"].encode()
            if is_internal_path(raw):
                return 403, "this envd route is internal and not reachable through the gateway"
            return None
        if route.traffic_access_token is None or target.port in self._streams.ports:
            # A stream port's own token stands in for the traffic token (checked next).
            return None
        given = next((v for n, v in scope["headers"] if n == _TRAFFIC_HEADER), None)
        if given is None:
            return 403, NO_TRAFFIC_HEADER
        if not hmac.compare_digest(given, route.traffic_access_token.encode()):
            return 403, BAD_TRAFFIC_HEADER
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send, target: Target) -> None:
        route = self._registry.route(target.sandbox_id)
        if route is None and self._waker is not None:
            route = await self._waker(target.sandbox_id)
        refusal = (502, NOT_FOUND) if route is None else self._refusal(scope, route, target)
        metered = None if self._telemetry is None else Metered(
            self._telemetry, scope, envd=route is not None and target.port == route.envd_port)
        if metered is not None:
            receive, send = metered.receive(receive), metered.send(send)
        error: str | None = None
        try:
            if refusal is not None:
                error = "sandbox_not_found" if refusal[0] == 502 else "refused"
                await self._refuse(scope, send, refusal, target)
                return
            assert route is not None
            if target.port in self._streams.ports and target.port != route.envd_port:
                checked = check_stream(self._streams, scope, target.sandbox_id,
                                       route.envd_access_token, target.port)
                if not isinstance(checked, StreamPass):
                    error = "refused"
                    await self._refuse(scope, send, (403, REFUSALS[checked]), target)
                    return
                scope = checked.scope
                if checked.set_cookie is not None:
                    send = with_cookie(send, checked.set_cookie)
            if self._recheck is not None and scope["type"] == "http":
                receive = _Rewindable(receive)
            # The sandbox is active while a request to it is in flight (its idle policy).
            self._registry.traffic_started(target.sandbox_id)
            try:
                error = await self._relay(scope, receive, send, target, route)
            finally:
                self._registry.traffic_ended(target.sandbox_id)
        finally:
            if metered is not None:
                metered.finish(error)

    async def _refuse(self, scope: Scope, send: Send, refusal: tuple[int, str],
                      target: Target) -> None:
        if scope["type"] == "websocket":
            await deny(scope, send, refusal[0], error_body(*refusal, target.sandbox_id))
        else:
            await send_error(send, refusal[0], refusal[1], target.sandbox_id)

    async def _relay(self, scope: Scope, receive: Receive, send: Send, target: Target,
                     route: Route) -> str | None:
        """Relay; returns why it could not, if it could not (the metrics' reason)."""
        if scope["type"] == "websocket":
            await relay_websocket(scope, receive, send, target.sandbox_id, route.address,
                                  target.port, self._dialer)
            return None
        try:
            try:
                await self._http.relay(
                    scope, receive, send, target.sandbox_id, route.address, target.port
                )
            except NotRunningThere:
                # Refused before any of the answer was sent, with the request's first
                # message read: once the state is read again, the request can go again.
                if self._recheck is None or not isinstance(receive, _Rewindable) \
                        or not receive.rewind():
                    raise
                again = await self._recheck(target.sandbox_id)
                if again is None:
                    raise
                await self._http.relay(
                    scope, receive, send, target.sandbox_id, again.address, target.port
                )
        except UpstreamFailed as exc:
            if exc.started:
                # Returning with the response incomplete makes the server cut the client
                # connection: the client sees a broken stream, never a truncated success.
                log.info("relay to %s:%d broke: %s", target.sandbox_id, target.port, exc)
                return "upstream_broke"
            gone = self._registry.route(target.sandbox_id) is None
            await send_error(send, 502, NOT_FOUND if gone else str(exc), target.sandbox_id)
            return "sandbox_not_found" if gone else "upstream_closed"
        except OSError:
            gone = self._registry.route(target.sandbox_id) is None
            message = NOT_FOUND if gone else PORT_CLOSED
            await send_error(send, 502, message, target.sandbox_id)
            return "sandbox_not_found" if gone else "port_closed"
        return None


class _Rewindable:
    """A request's ``receive`` whose first message can be given once more: a relay the
    sandbox's machine refused at its dial has read that message and nothing else."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._first: Message | None = None
        self._reads = 0
        self._again = False

    async def __call__(self) -> Message:
        if self._again:
            self._again = False
            assert self._first is not None
            return self._first
        message = await self._receive()
        self._reads += 1
        if self._first is None:
            self._first = message
        return message

    def rewind(self) -> bool:
        """Give the first message again at the next call; False when more was read (the
        request cannot be sent again) or when it was rewound already."""
        if self._reads != 1 or self._first is None:
            return False
        self._reads = 0
        self._again = True
        return True
