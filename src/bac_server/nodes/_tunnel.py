"""The node's tunnel into its sandboxes: HTTP ``CONNECT`` (RFC 9110, 9.3.6).

A sandbox's address exists only on the node that holds it. An API replica reaches one of
its ports by opening a TCP connection to the node's tunnel port and asking
``CONNECT <sandbox id>:<port>`` with ``Proxy-Authorization: Bearer <node token>``; the
node connects to the sandbox's address and answers ``200``, and from then on the bytes
go both ways untouched (HTTP, WebSocket, anything). The target is a sandbox id, never an
address: a replica can reach the sandboxes of the node and nothing else on its network.

Errors answer with a status and close: 407 (token), 400 (request), 404 (no such
sandbox running here: unknown, or paused, so that a replica whose view of it is stale
never reaches a frozen sandbox's port), 502 (the sandbox's port refused).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import socket
from collections.abc import Awaitable, Callable

from bac_server.backends.dialing import NotRunningThere
from bac_server.backends.relaying import pipe

log = logging.getLogger(__name__)

_HEAD_MAX = 4096
_TARGET = re.compile(rb"CONNECT ([a-z0-9]{1,64}):([0-9]{1,5}) HTTP/1\.1")

# sandbox id -> its address on this node (``LookupError`` when none runs here)
Resolve = Callable[[str], Awaitable[str]]


class TunnelError(OSError):
    """The tunnel was refused (the message has the node's status line)."""


class _NotHere(TunnelError, NotRunningThere):
    """Refused with 404: no such sandbox running on the node."""


class TunnelServer:
    def __init__(self, *, token: str, resolve: Resolve,
                 connect_timeout_s: float = 10.0) -> None:
        self._token = f"Bearer {token}".encode()
        self._resolve = resolve
        self._connect_timeout_s = connect_timeout_s
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port (useful when ``port`` is 0)."""
        self._server = await asyncio.start_server(self._serve, host, port, limit=_HEAD_MAX)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._open):
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open.add(task)
        try:
            await self._tunnel(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                TimeoutError):
            pass
        finally:
            self._open.discard(task)
            writer.close()

    async def _tunnel(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(self._connect_timeout_s):
            head = await reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        target = _TARGET.fullmatch(lines[0])
        auth = [line.split(b":", 1)[1].strip() for line in lines[1:]
                if line.lower().startswith(b"proxy-authorization:")]
        if len(auth) != 1 or not hmac.compare_digest(auth[0], self._token):
            await _answer(writer, b"407 Proxy Authentication Required")
            return
        if target is None or not 0 < int(target.group(2)) < 65536:
            await _answer(writer, b"400 Bad Request")
            return
        sandbox_id, port = target.group(1).decode(), int(target.group(2))
        try:
            address = await self._resolve(sandbox_id)
        except LookupError:
            await _answer(writer, b"404 Not Found")
            return
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                up_reader, up_writer = await asyncio.open_connection(address, port,
                                                                     limit=1 << 16)
        except (OSError, TimeoutError):
            await _answer(writer, b"502 Bad Gateway")
            return
        _no_delay(writer)
        _no_delay(up_writer)
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            up_writer.close()


async def _answer(writer: asyncio.StreamWriter, status: bytes) -> None:
    writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()


def _no_delay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def dial_tunnel(host: str, port: int, token: str, sandbox_id: str, target_port: int,
                      timeout_s: float = 10.0) -> socket.socket:
    """A connected non-blocking socket to ``target_port`` of the sandbox, through the
    node's tunnel at ``host:port``. ``OSError`` (``TunnelError`` when the node refused)."""
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        async with asyncio.timeout(timeout_s):
            await loop.sock_connect(sock, (host, port))
            await loop.sock_sendall(sock, (
                f"CONNECT {sandbox_id}:{target_port} HTTP/1.1\r\n"
                f"Host: {sandbox_id}:{target_port}\r\n"
                f"Proxy-Authorization: Bearer {token}\r\n\r\n").encode())
            head = await _read_head(loop, sock)
        status = head.split(b"\r\n", 1)[0]
        code = status.split(b" ", 2)[1:2]
        if code != [b"200"]:
            refused = _NotHere if code == [b"404"] else TunnelError
            raise refused(f"the node refused the tunnel to {sandbox_id}:{target_port}: "
                          f"{status.decode('latin-1')}")
    except TimeoutError as exc:
        sock.close()
        raise TimeoutError(f"the node's tunnel at {host}:{port} did not answer") from exc
    except BaseException:
        sock.close()
        raise
    return sock


async def _read_head(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """The answer's head and nothing after it (what follows is the sandbox's)."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        if len(head) >= _HEAD_MAX:
            raise TunnelError("the node's answer is too long")
        # Byte by byte past what is already known to be head: the head is a few dozen
        # bytes, and reading further would take the sandbox's first bytes with it.
        want = 4 - _overlap(head)
        chunk = await loop.sock_recv(sock, want)
        if not chunk:
            raise TunnelError("the node closed the tunnel")
        head += chunk
    return head


def _overlap(head: bytes) -> int:
    """How many bytes at the end of ``head`` begin the terminator."""
    for n in (3, 2, 1):
        if head.endswith(b"\r\n\r\n"[:n]):
            return n
    return 0
