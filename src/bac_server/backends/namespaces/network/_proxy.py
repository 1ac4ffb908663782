"""Host-name checks where a domain rule applies: a relay on the host end of each veth.

A connection to an address that is reachable only because a domain rule allowed a name
that resolved to it is redirected here by nftables (``redirect`` in the sandbox's nat
chain). The relay reads the opening (TLS ClientHello or HTTP request head, never
decrypting anything), asks the policy whether the host it names is allowed, and then
connects to the original destination from the host and relays bytes both ways. So a
sandbox allowed ``api.example.com`` cannot reach another site served from the same
address by naming it (domain fronting). An opening that names no host (another
protocol, or a server that speaks first) is decided on the address alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable

from bac_server.host import EGRESS_PROXY_PORT as PROXY_PORT

from ._sni import MAX_OPENING, NeedMore, opening_host

_SO_ORIGINAL_DST = 80
_OPENING_TIMEOUT_S = 3.0
_CONNECT_TIMEOUT_S = 10.0
_CHUNK = 1 << 16

# (client address, host or None, destination address, destination port) -> allowed
Decide = Callable[[str, str | None, str, int], bool]
# (client address, bytes out, bytes in)
Account = Callable[[str, int, int], None]


def original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, _SO_ORIGINAL_DST, 16)
    port, address = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(address), port


async def _read_opening(reader: asyncio.StreamReader) -> tuple[bytes, str | None]:
    opening = b""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _OPENING_TIMEOUT_S
    while True:
        try:
            return opening, opening_host(opening)
        except NeedMore:
            if len(opening) >= MAX_OPENING:
                return opening, None
            try:
                chunk = await asyncio.wait_for(reader.read(4096),
                                               max(0.0, deadline - loop.time()))
            except TimeoutError:
                return opening, None  # the server may speak first
            if not chunk:
                return opening, None
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


class EgressProxy:
    def __init__(self, decide: Decide, account: Account) -> None:
        self._decide = decide
        self._account = account
        self._servers: dict[str, asyncio.Server] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = str(writer.get_extra_info("peername")[0])
        upstream: asyncio.StreamWriter | None = None
        try:
            address, port = original_destination(writer.get_extra_info("socket"))
            opening, host = await _read_opening(reader)
            if not self._decide(client, host, address, port):
                return
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(address, port), _CONNECT_TIMEOUT_S)
            upstream = up_writer
            up_writer.write(opening)
            sent, received = await asyncio.gather(_pipe(reader, up_writer),
                                                  _pipe(up_reader, writer))
            self._account(client, sent + len(opening), received)
        except (OSError, TimeoutError):
            pass
        finally:
            for stream in (writer, upstream):
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
        for address in list(self._servers):
            self.close(address)
