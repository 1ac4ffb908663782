"""The sandboxes' DNS resolver: a forwarder listening on the host side of each veth.

Each sandbox's ``/etc/resolv.conf`` names its gateway (the host end of its veth); the
forwarder listens there on port 53, UDP and TCP, one pair of sockets per sandbox, so a
query is attributed to a sandbox by the address it arrived from (the firewall's
reverse-path check makes that address unforgeable) and no socket is ever exposed on the
host's other interfaces. What to answer is decided by a callback (the egress policy);
this module only moves DNS messages: parsing is dnspython's, the loops are ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

from ._listening import open_listener

_log = logging.getLogger(__name__)

DNS_PORT = 53
_UPSTREAM_TIMEOUT_S = 2.0
_TCP_IDLE_S = 10.0
_MAX_MESSAGE = 65535

# (client address, query bytes) -> answer bytes, or None to stay silent
Answerer = Callable[[str, bytes], Awaitable[bytes | None]]


def host_nameservers(resolv_conf: Path = Path("/etc/resolv.conf")) -> list[str]:
    """IPv4 nameservers of the host (the forwarder's default upstreams)."""
    found = []
    with contextlib.suppress(OSError):
        for line in resolv_conf.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver" and ":" not in parts[1]:
                found.append(parts[1])
    return found


class Upstream:
    """Sends a query to the configured servers in turn: UDP first, TCP if truncated."""

    def __init__(self, servers: list[str], port: int = DNS_PORT) -> None:
        self.servers = servers
        self.port = port

    async def _udp(self, server: str, query: bytes) -> bytes:
        loop = asyncio.get_running_loop()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            # A connected socket on a random port only accepts the server's answers.
            await loop.sock_connect(sock, (server, self.port))
            await loop.sock_sendall(sock, query)
            while True:
                answer = await loop.sock_recv(sock, _MAX_MESSAGE)
                if answer[:2] == query[:2]:
                    return answer

    async def _tcp(self, server: str, query: bytes) -> bytes:
        reader, writer = await asyncio.open_connection(server, self.port)
        try:
            writer.write(struct.pack("!H", len(query)) + query)
            (size,) = struct.unpack("!H", await reader.readexactly(2))
            return await reader.readexactly(size)
        finally:
            writer.close()

    async def query(self, query: bytes) -> bytes | None:
        for server in self.servers:
            try:
                answer = await asyncio.wait_for(self._udp(server, query), _UPSTREAM_TIMEOUT_S)
                if len(answer) > 2 and answer[2] & 0x02:  # TC: retry over TCP
                    answer = await asyncio.wait_for(self._tcp(server, query),
                                                    _UPSTREAM_TIMEOUT_S)
                return answer
            except (OSError, TimeoutError, asyncio.IncompleteReadError, struct.error):
                continue
        return None


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, answer: Answerer) -> None:
        self._answer = answer
        self._transport: asyncio.DatagramTransport | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Set once the transport has really closed its socket (a loop turn after close()).
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a datagram transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        task = asyncio.ensure_future(self._reply(data, addr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        try:
            answer = await self._answer(str(addr[0]), data)
        except Exception:
            _log.exception("dns: answering a query failed")
            return
        if answer is not None and self._transport is not None:
            # Over UDP an answer is cut to 512 bytes plus what EDNS allows; the client
            # retries over TCP when it sees TC, which the upstream already set if needed.
            self._transport.sendto(answer, addr)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        for task in self._tasks:
            task.cancel()


class DnsListeners:
    """UDP and TCP listeners per sandbox gateway address."""

    def __init__(self, answer: Answerer) -> None:
        self._answer = answer
        self._listeners: dict[str, tuple[_Datagrams, asyncio.Server]] = {}

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = str(writer.get_extra_info("peername")[0])
        try:
            while True:
                head = await asyncio.wait_for(reader.readexactly(2), _TCP_IDLE_S)
                query = await reader.readexactly(struct.unpack("!H", head)[0])
                answer = await self._answer(client, query)
                if answer is None:
                    break
                writer.write(struct.pack("!H", len(answer)) + answer)
                await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def listen(self, address: str) -> None:
        """Listen on ``address``:53 (idempotent)."""
        if address in self._listeners:
            return
        loop = asyncio.get_running_loop()
        _transport, protocol = await loop.create_datagram_endpoint(
            lambda: _Datagrams(self._answer), local_addr=(address, DNS_PORT))
        try:
            server = await open_listener(self._stream, address, DNS_PORT)
        except BaseException:
            protocol.close()
            raise
        self._listeners[address] = (protocol, server)

    def close(self, address: str) -> None:
        found = self._listeners.pop(address, None)
        if found is not None:
            found[0].close()
            found[1].close()

    async def close_all(self) -> None:
        """Close every listener and wait until their sockets are closed (a TCP server's
        listening socket closes at once; a datagram transport's a loop turn later). Not
        ``Server.wait_closed``: from Python 3.12 on it waits for the connections too."""
        listeners = list(self._listeners.values())
        self._listeners.clear()
        for datagrams, server in listeners:
            datagrams.close()
            server.close()
        for datagrams, _server in listeners:
            await datagrams.closed
