"""The egress relay's HTTP/1 side: every request on a connection checked, then written anew.

A relayed connection that opens with an HTTP/1 request line is not copied byte for
byte: h11 parses each request the sandbox sends (as a server would) and writes it again
to the site (as a client would), and each response the other way. So every request of a
keep-alive or pipelined connection is checked against the policy, not only the first,
and the site reads only what h11 wrote: one Host, one framing, no folded lines, no
bytes left over for it to read as a request the relay never saw (request smuggling).

Refused, which closes the connection (answers already relayed stay relayed; nothing of
the refused request reaches the site):

* a Host naming a host the policy does not allow on this port, more than one Host, a
  Host that is not a host name or address with an optional port;
* a request target other than a path (``/...``), ``*`` for OPTIONS, an absolute URL
  (``http://host/...``) or CONNECT's ``host:port`` naming the same host and port as Host;
* ``Content-Length`` with ``Transfer-Encoding``, a transfer coding other than chunked,
  a folded header line (obs-fold), an HTTP version other than 1.0 and 1.1 (HTTP/2's
  prior-knowledge preface included), anything h11 cannot parse.

Requests are answered one at a time, in order: a pipelined request waits in the socket
until the answer before it is relayed, which HTTP allows and keep-alive clients do not
notice. A WebSocket upgrade (or CONNECT) the site accepts ends the HTTP phase: the rest
is relayed as bytes (``Switched``). Other upgrade offers (``h2c``) are dropped from the
request, so the site answers in HTTP/1.1 and every request stays visible. An HTTP/1.0
request without Host is decided on the address alone, as before, and sent with the
address as its Host (h11 writes HTTP/1.1 only).

A request for a host with rules goes through ``transform`` once checked (the rule's
headers and the secrets scoped to the host, ``_transforms``); one it cannot make ready
(``Unanswerable``) is answered 502 by the relay itself, naming why, and the connection
closes with nothing of it sent.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import h11

_CHUNK = 1 << 16
MAX_HEAD = 16 * 1024
_FOLDED = re.compile(rb"\n[ \t]")
_HEAD_END = re.compile(rb"\n\r?\n")
_AUTHORITY = re.compile(r"(?P<name>[a-z0-9_.-]+|\[[0-9a-f:.]+\])(?::(?P<port>[0-9]{1,5}))?")
_ABSOLUTE = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#]*)(?:[/?#].*)?",
                       re.IGNORECASE | re.DOTALL)
_DEFAULT_PORT = {"http": 80, "https": 443}

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
# (host named by the request or None, log an allowed verdict) -> allowed
Check = Callable[[str | None, bool], bool]
Connect = Callable[[], Awaitable[Streams]]
# (a checked request, the host it names) -> the request to send; raises Unanswerable
Transform = Callable[[h11.Request, str | None], Awaitable[h11.Request]]


class Refused(Exception):
    """A request the policy or the framing rules refuse; the connection is closed."""


class Unanswerable(Refused):
    """A request that cannot be made ready for its host: the relay answers it (502, or
    ``status``) with this message (which must never hold a secret), then closes."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Switched:
    """The site accepted an upgrade: the bytes each side sent past it, still to relay."""

    to_server: bytes
    to_client: bytes


@dataclass(frozen=True)
class _Authority:
    name: str
    port: int | None

    def same(self, other: _Authority, default: int | None) -> bool:
        return self.name == other.name and (self.port or default) == (other.port or default)


def _authority(value: str) -> _Authority:
    match = _AUTHORITY.fullmatch(value.lower())
    if match is None:
        raise Refused(f"{value!r} is not a host")
    port = match["port"]
    if port is not None and not 0 < int(port) < 65536:
        raise Refused(f"{value!r} has no valid port")
    return _Authority(match["name"].rstrip("."), None if port is None else int(port))


def _ascii(value: bytes) -> str:
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        raise Refused("a request line or Host that is not ASCII") from None


def request_host(request: h11.Request) -> str | None:
    """The host ``request`` is for (lower-case, no port), None when it names none
    (HTTP/1.0 without Host, or an IPv6 literal); raises Refused for what may be read
    two ways."""
    if request.http_version not in (b"1.0", b"1.1"):
        raise Refused(f"HTTP/{_ascii(request.http_version)}")
    names = [name for name, _value in request.headers]
    if names.count(b"host") > 1:
        raise Refused("more than one Host header")
    if b"transfer-encoding" in names and b"content-length" in names:
        raise Refused("both Content-Length and Transfer-Encoding")
    hosts = [value for name, value in request.headers if name == b"host"]
    host = _authority(_ascii(hosts[0])) if hosts else None
    target = _ascii(request.target)
    if request.method == b"CONNECT":
        asked = _authority(target)
        if asked.port is None or host is None or not host.same(asked, asked.port):
            raise Refused(f"CONNECT {target} with another Host")
    elif not (target.startswith("/") or (target == "*" and request.method == b"OPTIONS")):
        match = _ABSOLUTE.fullmatch(target)
        if match is None:
            raise Refused(f"the request target {target[:100]!r}")
        asked = _authority(match["authority"])
        if host is None or not host.same(asked, _DEFAULT_PORT[match["scheme"].lower()]):
            raise Refused(f"{target[:100]!r} with another Host")
    if host is None or host.name.startswith("["):
        return None
    return host.name


def _forwarded(request: h11.Request, address: str) -> h11.Request:
    """``request`` as the site gets it: HTTP/1.1, upgrades other than WebSocket dropped."""
    headers = request.headers.raw_items()
    offers = b",".join(v for n, v in request.headers if n == b"upgrade")
    keep_upgrade = not offers or all(token.strip().split(b"/")[0].lower() == b"websocket"
                                     for token in offers.split(b","))
    if request.http_version == b"1.1" and keep_upgrade:
        return request
    if not keep_upgrade:
        headers = [(n, v) for n, v in headers
                   if n.lower() not in (b"upgrade", b"http2-settings")]
    if not any(n.lower() == b"host" for n, _v in headers):
        headers.insert(0, (b"Host", address.encode()))
    return h11.Request(method=request.method, target=request.target, headers=headers,
                       http_version="1.1")


class HttpRelay:
    """One relayed connection while it speaks HTTP/1 (``run``), counting its bytes."""

    def __init__(self, client: Streams, address: str, check: Check, connect: Connect,
                 transform: Transform | None = None) -> None:
        self._client_reader, self._client_writer = client
        self._address = address
        self._check = check
        self._connect = connect
        self._transform = transform
        self._from_client = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self._to_server = h11.Connection(h11.CLIENT)
        self._server: Streams | None = None
        # Set when a request-response cycle ends or the protocol switches: the side that
        # waits for the other re-checks its state.
        self._client_turn = asyncio.Event()
        self._server_turn = asyncio.Event()
        self._last_host: str | None = None
        self.sent = 0
        self.received = 0

    @property
    def server(self) -> Streams | None:
        """The site's streams once the first request was allowed (the caller closes)."""
        return self._server

    async def run(self, opening: bytes) -> Switched | None:
        """Relay requests and answers until either side closes or a request is refused
        (None), or the site accepts an upgrade (``Switched``)."""
        self._from_client.receive_data(opening)
        self.sent += len(opening)
        try:
            first = await self._client_event()
            if type(first) is not h11.Request:
                return None
            request = await self._ready(first)
        except Unanswerable as exc:
            await self._answer(exc)
            return None
        except (Refused, h11.ProtocolError):
            return None
        try:
            self._server = await self._connect()
        except Unanswerable as exc:
            await self._answer(exc)
            return None
        try:
            await self._send_up(request)
        except h11.ProtocolError:
            return None
        tasks = {asyncio.ensure_future(self._requests()),
                 asyncio.ensure_future(self._responses())}
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if self._switched():
                await asyncio.wait(tasks)
        finally:
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Unanswerable):
                await self._answer(result)
            if isinstance(result, BaseException) and not isinstance(
                    result, Refused | h11.ProtocolError | OSError | asyncio.CancelledError):
                raise result
        if not self._switched():
            return None
        return Switched(self._from_client.trailing_data[0], self._to_server.trailing_data[0])

    def _switched(self) -> bool:
        return (self._from_client.our_state is h11.SWITCHED_PROTOCOL
                and self._to_server.our_state is h11.SWITCHED_PROTOCOL)

    async def _ready(self, request: h11.Request) -> h11.Request:
        """``request`` checked, then as the site gets it."""
        host = request_host(request)
        # The log keeps one line per host a connection changes to, and every refusal.
        if not self._check(host, host != self._last_host):
            raise Refused(f"{host or self._address} is not allowed")
        self._last_host = host
        forwarded = _forwarded(request, self._address)
        if self._transform is not None:
            forwarded = await self._transform(forwarded, host)
        return forwarded

    async def _answer(self, refusal: Unanswerable) -> None:
        """Answer the request in flight with ``refusal`` (nothing of it was sent)."""
        body = f"bac egress relay: {refusal}\n".encode()
        try:
            out = self._from_client.send(h11.Response(status_code=refusal.status, headers=[
                (b"Content-Type", b"text/plain; charset=utf-8"),
                (b"Content-Length", str(len(body)).encode()), (b"Connection", b"close")]))
            out += self._from_client.send(h11.Data(data=body))
            out += self._from_client.send(h11.EndOfMessage()) or b""
            self._client_writer.write(out)
            await self._client_writer.drain()
        except (h11.ProtocolError, OSError, RuntimeError):
            pass

    async def _client_event(self) -> h11.Event | type[h11.PAUSED]:
        conn = self._from_client
        while True:
            if conn.their_state is h11.IDLE:
                # h11 unfolds obs-fold; the site must not get a head another reader of
                # the same bytes would have split differently, so such a head is refused.
                buffered = conn.trailing_data[0]
                end = _HEAD_END.search(buffered)
                if _FOLDED.search(buffered if end is None else buffered[:end.start()]):
                    raise Refused("a folded header line")
            event = conn.next_event()
            if event is h11.PAUSED or isinstance(event, h11.Event):
                return event
            data = await self._client_reader.read(_CHUNK)
            self.sent += len(data)
            conn.receive_data(data)

    async def _send_up(self, event: h11.Event) -> None:
        assert self._server is not None
        data = self._to_server.send(event)
        if data:
            self._server[1].write(data)
            await self._server[1].drain()

    def _next_cycle(self) -> None:
        client, server = self._from_client, self._to_server
        if (client.our_state is client.their_state is h11.DONE
                and server.our_state is server.their_state is h11.DONE):
            client.start_next_cycle()
            server.start_next_cycle()
            self._client_turn.set()
            self._server_turn.set()

    async def _requests(self) -> None:
        conn = self._from_client
        while True:
            if conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                # The request is in; its answer (or the switch) comes first.
                if conn.their_state is h11.SWITCHED_PROTOCOL:
                    return
                await self._client_turn.wait()
                self._client_turn.clear()
                continue
            event = await self._client_event()
            if type(event) is h11.ConnectionClosed:
                return  # between requests: nothing is left to answer
            if event is h11.PAUSED:
                continue
            assert isinstance(event, h11.Event)
            if type(event) is h11.Request:
                event = await self._ready(event)
            await self._send_up(event)
            self._next_cycle()

    async def _responses(self) -> None:
        assert self._server is not None
        reader = self._server[0]
        conn = self._to_server
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(_CHUNK)
                self.received += len(data)
                conn.receive_data(data)
                continue
            if event is h11.PAUSED:
                if conn.their_state is h11.SWITCHED_PROTOCOL:
                    return
                await self._server_turn.wait()
                self._server_turn.clear()
                continue
            if type(event) is h11.ConnectionClosed:
                return
            assert isinstance(event, h11.Event)
            if type(event) is h11.Response and event.http_version == b"1.0":
                # The site closes after this answer; the sandbox must not expect more.
                event = h11.Response(status_code=event.status_code, reason=event.reason,
                                     headers=[*event.headers.raw_items(),
                                              (b"Connection", b"close")])
            out = self._from_client.send(event)
            if out:
                self._client_writer.write(out)
                await self._client_writer.drain()
            if self._switched():
                self._client_turn.set()
                return
            self._next_cycle()
            if type(event) is h11.EndOfMessage and self._from_client.our_state is h11.MUST_CLOSE:
                return

