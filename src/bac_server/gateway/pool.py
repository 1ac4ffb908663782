"""Keep-alive connections to sandbox ports, reused across requests.

Opening a TCP connection per request costs a connect round trip plus kernel work on both
sides; the command round-trip budget (p50 ≤ 5 ms through the gateway) leaves no room for it.
Connections are pooled per (sandbox, address, port) and dropped when the sandbox goes away.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import defaultdict

_Key = tuple[str, str, int]


class Upstream:
    """One open connection to a port inside a sandbox."""

    __slots__ = ("idle_since", "key", "reader", "writer")

    def __init__(self, key: _Key, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.key = key
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self, now: float, max_idle: float) -> bool:
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and now - self.idle_since < max_idle
        )

    def close(self) -> None:
        self.writer.close()


class Pool:
    def __init__(
        self,
        *,
        max_idle_per_key: int = 64,
        max_idle_seconds: float = 4.0,
        connect_timeout: float = 10.0,
    ) -> None:
        # Servers commonly drop idle keep-alive connections after 5 s (uvicorn's default);
        # never reusing one older than that avoids most races with their close.
        self._max_idle = max_idle_seconds
        self._max_per_key = max_idle_per_key
        self._connect_timeout = connect_timeout
        self._idle: dict[_Key, list[Upstream]] = defaultdict(list)

    async def acquire(self, sandbox_id: str, address: str, port: int) -> tuple[Upstream, bool]:
        """A connection and whether it was reused. Raises ``OSError`` when none can open."""
        key = (sandbox_id, address, port)
        idle = self._idle.get(key)
        if idle:
            now = time.monotonic()
            while idle:
                conn = idle.pop()
                if conn.usable(now, self._max_idle):
                    return conn, True
                conn.close()
        return await self.connect(key), False

    async def connect(self, key: _Key) -> Upstream:
        try:
            async with asyncio.timeout(self._connect_timeout):
                reader, writer = await asyncio.open_connection(key[1], key[2], limit=1 << 20)
        except TimeoutError as exc:
            raise ConnectionRefusedError(f"connecting to port {key[2]} timed out") from exc
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Upstream(key, reader, writer)

    def release(self, conn: Upstream) -> None:
        """Return a connection whose last response was read completely."""
        idle = self._idle[conn.key]
        if len(idle) >= self._max_per_key or conn.writer.is_closing():
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    def drop_sandbox(self, sandbox_id: str) -> None:
        for key in [k for k in self._idle if k[0] == sandbox_id]:
            for conn in self._idle.pop(key):
                conn.close()

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
