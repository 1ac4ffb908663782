"""Keep-alive connections to sandbox ports, reused across requests.

Opening a TCP connection per request costs a connect round trip plus kernel work on both
sides; the command round-trip budget (p50 ≤ 5 ms through the gateway) leaves no room for it.
Connections are pooled per (sandbox, address, port). When a sandbox goes away every
connection to it is closed, idle or in use, so relays in flight end at once instead of
waiting for the sandbox's sockets to time out.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable

from bac_server.backends.dialing import DIRECT, Dialer, open_dialed

_Key = tuple[str, str, int]


class Upstream:
    """One open connection to a port inside a sandbox."""

    __slots__ = ("idle_since", "key", "on_close", "reader", "writer")

    def __init__(self, key: _Key, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.key = key
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0
        self.on_close: Callable[[Upstream], None] | None = None

    def usable(self, now: float, max_idle: float) -> bool:
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and now - self.idle_since < max_idle
        )

    def close(self) -> None:
        self.writer.close()
        if self.on_close is not None:
            self.on_close(self)
            self.on_close = None


class Pool:
    def __init__(
        self,
        *,
        max_idle_per_key: int = 64,
        max_idle_seconds: float = 4.0,
        connect_timeout: float = 10.0,
        dialer: Dialer = DIRECT,
    ) -> None:
        """``dialer``: how a connection to a sandbox's port is opened (``backends.dialing``)."""
        self._dialer = dialer
        # Servers commonly drop idle keep-alive connections after 5 s (uvicorn's default);
        # never reusing one older than that avoids most races with their close.
        self._max_idle = max_idle_seconds
        self._max_per_key = max_idle_per_key
        self._connect_timeout = connect_timeout
        self._idle: dict[_Key, list[Upstream]] = defaultdict(list)
        self._open: dict[str, set[Upstream]] = defaultdict(set)

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
                reader, writer = await open_dialed(self._dialer, *key, limit=1 << 20)
        except TimeoutError as exc:
            raise ConnectionRefusedError(f"connecting to port {key[2]} timed out") from exc
        conn = Upstream(key, reader, writer)
        self._open[key[0]].add(conn)
        conn.on_close = self._forget
        return conn

    def _forget(self, conn: Upstream) -> None:
        owned = self._open.get(conn.key[0])
        if owned is not None:
            owned.discard(conn)
            if not owned:
                del self._open[conn.key[0]]

    def release(self, conn: Upstream) -> None:
        """Return a connection whose last response was read completely."""
        idle = self._idle[conn.key]
        if len(idle) >= self._max_per_key or conn.writer.is_closing():
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    def drop_sandbox(self, sandbox_id: str) -> None:
        """Close every connection to the sandbox, idle or carrying a request."""
        for key in [k for k in self._idle if k[0] == sandbox_id]:
            del self._idle[key]
        for conn in list(self._open.get(sandbox_id, ())):
            conn.close()

    def close(self) -> None:
        self._idle.clear()
        for conns in list(self._open.values()):
            for conn in list(conns):
                conn.close()
