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
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable

from bac_server.host import EGRESS_PROXY_PORT as PROXY_PORT

from ._http_relay import HttpRelay, Streams
from ._opening import MAX_OPENING, Kind, NeedMore, Opening, classify, undecided

_SO_ORIGINAL_DST = 80
_OPENING_TIMEOUT_S = 3.0
_CONNECT_TIMEOUT_S = 10.0
_CHUNK = 1 << 16

# (client address, host or None, destination address, destination port, log an
# allowed verdict) -> allowed
Decide = Callable[[str, str | None, str, int, bool], bool]
# (client address, bytes out, bytes in)
Account = Callable[[str, int, int], None]


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


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    total = 0
    try:
        while chunk := await reader.read(_CHUNK):
            total += len(chunk)
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        pass
    return total


async def _relay(client: Streams, server: Streams, to_server: bytes, to_client: bytes
                 ) -> tuple[int, int]:
    """Bytes both ways until each side is done, after what each is still owed."""
    server[1].write(to_server)
    client[1].write(to_client)
    sent, received = await asyncio.gather(_pipe(client[0], server[1]),
                                          _pipe(server[0], client[1]))
    return sent + len(to_server), received + len(to_client)


class EgressProxy:
    def __init__(self, decide: Decide, account: Account) -> None:
        self._decide = decide
        self._account = account
        self._servers: dict[str, asyncio.Server] = {}

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
                                  connect)
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
            self._servers[address] = await asyncio.start_server(self._handle, address,
                                                                PROXY_PORT)

    def close(self, address: str) -> None:
        server = self._servers.pop(address, None)
        if server is not None:
            server.close()

    def close_all(self) -> None:
        """Close every listener (its listening socket closes at once; the relays in
        flight end on their own)."""
        for address in list(self._servers):
            self.close(address)
