"""One build's log on its way to the store: numbered, bounded, redacted, written in batches.

The build engine reports lines as they come (``add``, from the event loop or from a worker
thread); they are numbered in arrival order (the number is the SDK's ``logsOffset``) and
written to the store in batches a fraction of a second apart, so a chatty ``pip install``
costs a few transactions, not one per line. Followers are told after every write.

Bounded: at most :data:`MAX_LINES` lines per build are kept; later ones are counted and a
final line says how many were dropped. Lines longer than :data:`MAX_LINE_BYTES` are cut.
Secrets given at creation (a registry password) never reach the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from bac_server.store import BuildLogRecord, BuildStore
from bac_server.templates import LogEntry, LogLevel

MAX_LINES = 10_000
MAX_LINE_BYTES = 16_384
FLUSH_DELAY_S = 0.1
_BATCH = 500


class BuildLog:
    def __init__(self, build_store: BuildStore, build_id: str, *, on_write: Callable[[], None],
                 secrets: Iterable[str] = ()) -> None:
        self._build_store = build_store
        self._build_id = build_id
        self._on_write = on_write
        self._secrets = tuple(s for s in secrets if s)
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._pending: list[BuildLogRecord] = []
        self._next = 0
        self._dropped = 0
        self._lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None
        self._writes: set[asyncio.Task[None]] = set()
        self.last_step: str | None = None  # the step of the latest line (the failing one)

    def add(self, entry: LogEntry) -> None:
        """Record one line (non-blocking; safe to call from another thread)."""
        if threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self._add, entry)
        else:
            self._add(entry)

    def line(self, level: LogLevel, message: str, step: str | None = None) -> None:
        self.add(LogEntry(timestamp=datetime.now(UTC).timestamp(), level=level,
                          message=message, step=step))

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _add(self, entry: LogEntry) -> None:
        if self._next >= MAX_LINES - 1:  # the last number is kept for the "dropped" line
            self._dropped += 1
            return
        if entry.step is not None:
            self.last_step = entry.step
        message = self.redact(entry.message)
        if len(message.encode()) > MAX_LINE_BYTES:
            message = message.encode()[:MAX_LINE_BYTES].decode(errors="ignore") + " [cut]"
        self._pending.append(BuildLogRecord(
            build_id=self._build_id, seq=self._next,
            at=datetime.fromtimestamp(entry.timestamp, UTC), level=_level(entry.level),
            message=message, step=entry.step))
        self._next += 1
        if len(self._pending) >= _BATCH:
            task = self._loop.create_task(self.flush())
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
        elif self._flusher is None or self._flusher.done():
            self._flusher = self._loop.create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        # Batching, not synchronisation: lines that arrive within the delay share a write.
        # Lines added while this task writes see it running and schedule nothing: it goes
        # round again for them (the check and the task's end have no await between them).
        # ``close`` cancels this task; a write it has begun is shielded and finishes (its
        # batch is out of ``_pending``: cancelled, it would be lost), close's own flush
        # waiting for it on the lock.
        while True:
            await asyncio.sleep(FLUSH_DELAY_S)
            await asyncio.shield(self.flush())
            if not self._pending:
                return

    async def flush(self) -> None:
        async with self._lock:
            batch, self._pending = self._pending, []
            if batch:
                await self._build_store.add_build_logs(batch)
                self._on_write()

    async def close(self) -> None:
        """Write everything still pending (and the "dropped" line); call before the build's
        status changes, so a client that sees it finished has every line."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        if self._dropped:
            self._pending.append(BuildLogRecord(
                build_id=self._build_id, seq=self._next, at=datetime.now(UTC), level="warn",
                message=f"{self._dropped} more log lines were not kept (at most {MAX_LINES} "
                        "per build)"))
            self._next += 1
            self._dropped = 0
        await self.flush()


def _level(level: LogLevel | str) -> str:
    value = level.value if isinstance(level, LogLevel) else str(level)
    return value if value in ("debug", "info", "warn", "error") else "info"
