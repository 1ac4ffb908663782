"""Host-name checks where a domain rule applies: a relay on the host end of each veth.

A connection to an address that is reachable only because a domain rule allowed a name
that resolved to it is redirected here by nftables (``redirect`` in the sandbox's nat
chain). The relay reads the opening (``_opening``), asks the policy whether the host it
names is allowed, and then connects to the original destination from the host. So a
sandbox allowed ``api.example.com`` cannot reach another site served from the same
address by naming it (domain fronting):

* TLS: the ClientHello's SNI is checked, then bytes are relayed both ways. What the
  encrypted stream then asks for (the HTTP Host inside it) cannot be seen without
  terminating TLS, so a site that serves other names on one certificate's connection
  is not held to the SNI.
* HTTP/1: every request is checked and written anew (``_http_relay``), for as long as
  the connection speaks HTTP.
* Anything else (another protocol, a server that speaks first) is decided on the
  address alone; an opening cut short before it is known is refused.

Hosts with rules (E2B's ``rules``: headers, secrets) are different: their requests are
made ready for them (``_transforms``). Over TLS the relay terminates the connection with
a certificate for the SNI from the sandbox's relay CA (``_relay_ca``), reads HTTP/1.1
inside, refuses a request whose Host is not the SNI, and opens its own TLS connection to
the original destination, verified for that name against the host's and the operator's
CAs; every other TLS connection stays passed through, unread. Over plain HTTP a ruled
request is made ready only on a connection to an address the sandbox's resolver answered
for its host (otherwise any allowed site's address could receive it by naming the ruled
host), and refused otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import Callable

import h11

from bac_server.backends.egress import SecretLookup
from bac_server.backends.relaying import CHUNK, pipe
from bac_server.host import EGRESS_PROXY_PORT as PROXY_PORT

from ._http_relay import HttpRelay, Streams, Transform, Unanswerable
from ._listening import open_listener
from ._name_checks import Ruled
from ._opening import MAX_OPENING, Kind, NeedMore, Opening, classify, undecided
from ._transforms import transformed

_SO_ORIGINAL_DST = 80
_OPENING_TIMEOUT_S = 3.0
_CONNECT_TIMEOUT_S = 10.0

# (client address, host or None, destination address, destination port, log an
# allowed verdict) -> allowed
Decide = Callable[[str, str | None, str, int, bool], bool]
# (client address, bytes out, bytes in)
Account = Callable[[str, int, int], None]
# (client address, host) -> the host's rules for that sandbox, None when it has none
RulesOf = Callable[[str, str], Ruled | None]
_HANDSHAKE_TIMEOUT_S = 10.0
_DRAIN_TIMEOUT_S = 5.0


def original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, _SO_ORIGINAL_DST, 16)
    port, address = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(address), port


async def _read_opening(reader: asyncio.StreamReader) -> tuple[bytes, Opening]:
    opening = b""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _OPENING_TIMEOUT_S
    while True:
        try:
            return opening, classify(opening)
        except NeedMore:
            if len(opening) >= MAX_OPENING:
                return opening, undecided(opening)
            try:
                chunk = await asyncio.wait_for(reader.read(4096),
                                               max(0.0, deadline - loop.time()))
            except TimeoutError:
                return opening, undecided(opening)  # the server may speak first
            if not chunk:
                return opening, undecided(opening)
            opening += chunk


async def _relay(client: Streams, server: Streams, to_server: bytes, to_client: bytes
                 ) -> tuple[int, int]:
    """Bytes both ways until each side is done, after what each is still owed."""
    server[1].write(to_server)
    client[1].write(to_client)
    sent, received = await asyncio.gather(pipe(client[0], server[1]),
                                          pipe(server[0], client[1]))
    return sent + len(to_server), received + len(to_client)


def upstream_context(extra_cas: bytes) -> ssl.SSLContext:
    """What the relay verifies a ruled host's certificate against: the host's trust
    store and the operator's CAs (``BAC_SANDBOX_CA_CERTS``, which sandboxes trust too)."""
    context = ssl.create_default_context()
    if extra_cas.strip():
        context.load_verify_locations(cadata=extra_cas.decode("ascii", "replace"))
    context.set_alpn_protocols(["http/1.1"])
    return context


async def _tls_server_side(client: Streams, opening: bytes, context: ssl.SSLContext
                           ) -> tuple[Streams, list[asyncio.Task[int]], asyncio.StreamWriter]:
    """TLS terminated on the sandbox's connection, whose first bytes (``opening``) were
    read already: they and the rest are fed through a socket pair to asyncio's TLS
    server side. Returns the plaintext streams, the two copying tasks and the pair's
    outer end (the caller closes both)."""
    inner, outer = socket.socketpair()
    try:
        outer_reader, outer_writer = await asyncio.open_connection(sock=outer)
    except BaseException:
        inner.close()
        outer.close()
        raise
    outer_writer.write(opening)
    pumps = [asyncio.ensure_future(pipe(client[0], outer_writer)),
             asyncio.ensure_future(pipe(outer_reader, client[1]))]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK)
    protocol = asyncio.StreamReaderProtocol(reader)
    try:
        transport, _ = await loop.connect_accepted_socket(
            lambda: protocol, inner, ssl=context, ssl_handshake_timeout=_HANDSHAKE_TIMEOUT_S)
    except BaseException:
        inner.close()
        for pump in pumps:
            pump.cancel()
        outer_writer.close()
        raise
    return (reader, asyncio.StreamWriter(transport, protocol, reader, loop)), pumps, \
        outer_writer


class EgressProxy:
    def __init__(self, decide: Decide, account: Account, rules_of: RulesOf | None = None,
                 lookup: SecretLookup | None = None,
                 upstream_tls: ssl.SSLContext | None = None) -> None:
        self._decide = decide
        self._account = account
        self._rules_of = rules_of
        self._lookup = lookup
        self._upstream_tls = upstream_tls
        self._servers: dict[str, asyncio.Server] = {}

    def _ruled(self, client: str, host: str | None) -> Ruled | None:
        if host is None or self._rules_of is None:
            return None
        return self._rules_of(client, host)

    def _plain_transform(self, client: str, address: str) -> Transform:
        async def transform(request: h11.Request, host: str | None) -> h11.Request:
            ruled = self._ruled(client, host)
            if ruled is None:
                return request
            # SECURITY: a plain-HTTP connection goes to the address the sandbox chose;
            # a ruled host's secrets go only to an address answered for that host.
            if address not in ruled.answered:
                raise Unanswerable(f"{address} was not resolved for {ruled.host} here; "
                                   "its rules apply only on connections to its own "
                                   "addresses")
            return await transformed(request, ruled.rules, ruled.team, self._lookup)
        return transform

    async def _terminate(self, client: Streams, opening: bytes, sandbox: str, ruled: Ruled,
                         address: str, port: int) -> None:
        """A TLS connection to a ruled host, terminated and relayed request by request."""
        if ruled.ca is None or self._upstream_tls is None:
            return  # no CA given to this sandbox: refused rather than sent unread
        host = ruled.host
        tls, pumps, outer = await _tls_server_side(client, opening,
                                                   ruled.ca.server_context(host))
        server: Streams | None = None
        upstream_tls = self._upstream_tls

        async def connect() -> Streams:
            try:
                return await asyncio.wait_for(asyncio.open_connection(
                    address, port, ssl=upstream_tls, server_hostname=host,
                    ssl_handshake_timeout=_HANDSHAKE_TIMEOUT_S), _CONNECT_TIMEOUT_S)
            except ssl.SSLCertVerificationError as exc:
                raise Unanswerable(f"the certificate of {host} did not verify "
                                   f"({exc.verify_message})") from None

        def check(asked: str | None, log: bool) -> bool:
            # SECURITY: the request's Host must be the name the TLS connection was opened
            # (and its upstream verified) for: the rules and secrets chosen are its.
            if asked != host:
                raise Unanswerable(f"this connection was opened for {host}, not "
                                   f"{asked or 'a request without Host'}", status=421)
            return self._decide(sandbox, asked, address, port, log)

        async def transform(request: h11.Request, _host: str | None) -> h11.Request:
            # The rules as they are now: a PUT may have changed them since the connection
            # opened (none left: the request goes as the sandbox wrote it).
            now = self._ruled(sandbox, host)
            if now is None:
                return request
            # SECURITY: the name must be one answered for this address, not only one whose
            # certificate the site at it holds (a shared or wildcard certificate).
            if address not in now.answered:
                raise Unanswerable(f"{address} was not resolved for {host} here; its "
                                   "rules apply only on connections to its own addresses")
            return await transformed(request, now.rules, now.team, self._lookup)

        try:
            inner_opening, found = await _read_opening(tls[0])
            if found.kind is not Kind.HTTP:
                return  # HTTP/1.1 only inside (ALPN offers nothing else)
            relay = HttpRelay(tls, host, check, connect, transform)
            try:
                switched = await relay.run(inner_opening)
            finally:
                server = relay.server
                self._account(sandbox, relay.sent, relay.received)
            if switched is not None and server is not None:
                sent, received = await _relay(tls, server, switched.to_server,
                                              switched.to_client)
                self._account(sandbox, sent, received)
        finally:
            for stream in (tls[1], None if server is None else server[1]):
                if stream is not None:
                    with contextlib.suppress(OSError, RuntimeError):
                        stream.close()
            # What the TLS side still holds for the sandbox (a last answer, close_notify)
            # reaches it before the pair closes; then the sandbox's side is dropped.
            with contextlib.suppress(TimeoutError, OSError, RuntimeError):
                await asyncio.wait_for(asyncio.shield(pumps[1]), _DRAIN_TIMEOUT_S)
            for pump in pumps:
                pump.cancel()
            with contextlib.suppress(OSError, RuntimeError):
                outer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = str(writer.get_extra_info("peername")[0])
        server: Streams | None = None
        try:
            address, port = original_destination(writer.get_extra_info("socket"))

            async def connect() -> Streams:
                return await asyncio.wait_for(asyncio.open_connection(address, port),
                                              _CONNECT_TIMEOUT_S)

            opening, found = await _read_opening(reader)
            if found.kind is Kind.HTTP:
                relay = HttpRelay((reader, writer), address,
                                  lambda host, log: self._decide(client, host, address, port,
                                                                 log),
                                  connect, self._plain_transform(client, address))
                try:
                    switched = await relay.run(opening)
                finally:
                    server = relay.server
                    self._account(client, relay.sent, relay.received)
                if switched is not None and server is not None:
                    sent, received = await _relay((reader, writer), server,
                                                  switched.to_server, switched.to_client)
                    self._account(client, sent, received)
                return
            if found.kind is Kind.UNDECIDED or \
                    not self._decide(client, found.host, address, port, True):
                return
            ruled = self._ruled(client, found.host) if found.kind is Kind.TLS else None
            if ruled is not None:
                await self._terminate((reader, writer), opening, client, ruled, address, port)
                return
            server = await connect()
            sent, received = await _relay((reader, writer), server, opening, b"")
            self._account(client, sent, received)
        except (OSError, TimeoutError):
            pass
        finally:
            for stream in (writer, None if server is None else server[1]):
                if stream is not None:
                    with contextlib.suppress(OSError, RuntimeError):
                        stream.close()

    async def listen(self, address: str) -> None:
        if address not in self._servers:
            self._servers[address] = await open_listener(self._handle, address, PROXY_PORT)

    def close(self, address: str) -> None:
        server = self._servers.pop(address, None)
        if server is not None:
            server.close()

    def close_all(self) -> None:
        """Close every listener (its listening socket closes at once; the relays in
        flight end on their own)."""
        for address in list(self._servers):
            self.close(address)
