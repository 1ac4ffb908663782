"""A sandbox's trace: its event log read as one stream, fed also from inside the sandbox.

envd reports every process it ran and every ``/files`` transfer (``bac_envd._trace``),
and the sandbox's keeper each restart of envd (``bac_envd._keeper``);
the backend hands each report to :meth:`TraceIntake.receive` with the sandbox it named by
the channel the report came on (``backends.base.Traced``). A report is untrusted (the
sandbox's root can send anything): it is size-capped, parsed, checked against the schema
of its kind (unknown fields dropped, text clipped), rate-limited per sandbox (a token
bucket) and only then queued; what fails is counted by reason and dropped. The queue is
written in batches (:meth:`TraceIntake.flush`, every ``flush_s`` or at ``batch_max``).

:class:`Traces` reads it back: one sandbox's events, live or ended, or a *run* (every
sandbox of the team whose metadata holds given pairs), filtered by kind and time, paged by
event id; ``follow`` streams new events until the sandbox ends. Retention: events older
than ``retention_days`` go, and of each sandbox's in-sandbox events (process, transfer)
only the newest ``keep_per_sandbox`` stay (:meth:`Traces.prune`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import Counter
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bac_server.backends.base import Backend, NetworkControl
from bac_server.backends.egress import NetworkUsage
from bac_server.store import EventRecord, SandboxStore, TraceQuery

from ..errors import InvalidRequest
from ..keys import Team
from ._events import EventKind
from ._history import History
from ._registry import LiveSandbox, Registry
from ._states import SandboxState

log = logging.getLogger(__name__)

IN_SANDBOX_KINDS = frozenset({EventKind.PROCESS.value, EventKind.TRANSFER.value,
                              EventKind.NETWORK.value, EventKind.EGRESS_DENIED.value,
                              EventKind.ENVD_RESTARTED.value})
MAX_PAGE = 1000
# The end of a process's stdout and stderr a report may carry (envd sends 512 bytes).
OUTPUT_TAIL = 1024
# Keys a run query may name (the store looks them up as JSON paths).
_RUN_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,256}")
_TEXT = 1024


class BadReport(ValueError):
    """A report from inside a sandbox that is not one (the message is the reason)."""


@dataclass(frozen=True)
class TraceSettings:
    max_datagram: int = 16 * 1024
    rate_per_s: float = 200.0  # sustained reports per sandbox
    burst: float = 1000.0
    batch_max: int = 500
    queue_max: int = 20_000  # beyond: dropped ("backlog"), the store is not keeping up
    flush_s: float = 0.2
    retention_days: float = 7.0
    keep_per_sandbox: int = 10_000
    prune_every_s: float = 600.0
    # Seconds between reads of each running sandbox's egress counters and destination log
    # (a ``network`` event of the bytes since, an ``egress_denied`` per refused
    # destination tried again); 0: none.
    network_interval_s: float = 30.0
    max_denials_per_read: int = 20


# -- what a report may say ---------------------------------------------------------------

def _text(value: Any, limit: int = _TEXT) -> str:
    if not isinstance(value, str):
        raise BadReport("a text field is not a string")
    return value[:limit]


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 62:
        raise BadReport("a count is not a non-negative integer")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value \
            or not 0 <= value < 1e13:
        raise BadReport("a duration or time is not a non-negative number")
    return float(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadReport("a flag is not a boolean")
    return value


_Check = Callable[[Any], Any]
_PROCESS: dict[str, _Check] = {
            "pid": _count, "cmd": _text, "user": _text, "cwd": _text, "pty": _flag,
            "started_at": _number, "duration_ms": _number, "stdout_bytes": _count,
            "stderr_bytes": _count, "timed_out": _flag, "client_left": _flag,
            "exit_code": lambda v: _count(v) if v != -1 else -1, "signal": _count,
            "tag": lambda v: None if v is None else _text(v, 256), "unsent": _count,
            "stdout_tail": lambda v: _text(v, OUTPUT_TAIL),
            "stderr_tail": lambda v: _text(v, OUTPUT_TAIL)}
_TRANSFER: dict[str, _Check] = {
             "direction": _text, "path": _text, "bytes": _count, "user": _text,
             "duration_ms": _number, "status": _count, "ok": _flag, "unsent": _count,
             "paths": lambda v: [_text(p, 256) for p in v[:16]] if isinstance(v, list)
             else _text(v)}
_RESTART: dict[str, _Check] = {
    "count": _count, "exit_code": _count, "signal": _count, "uptime_s": _number,
    "unsent": _count}
_SCHEMAS = {"process": _PROCESS, "transfer": _TRANSFER, "envd_restarted": _RESTART}
_REQUIRED = {"process": ("pid", "cmd", "duration_ms"), "transfer": ("direction", "bytes"),
             "envd_restarted": ("count",)}


def parse_report(data: bytes, max_size: int) -> tuple[EventKind, str, str, dict[str, Any]]:
    """(kind, level, message, fields) of one report, or ``BadReport``."""
    if len(data) > max_size:
        raise BadReport("too large")
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadReport("not JSON") from exc
    if not isinstance(body, dict):
        raise BadReport("not an object")
    kind = body.get("kind")
    if kind not in _REQUIRED:
        raise BadReport("unknown kind")
    schema = _SCHEMAS[kind]
    if any(name not in body for name in _REQUIRED[kind]):
        raise BadReport("a required field is missing")
    fields: dict[str, Any] = {"kind": kind}
    for name, check in schema.items():
        if name in body:
            fields[name] = check(body[name])
    if kind == "process":
        if ("exit_code" in fields) == ("signal" in fields):
            raise BadReport("a process ends with an exit code or a signal")
        end = (f"killed by signal {fields['signal']}" if "signal" in fields
               else f"exited {fields['exit_code']}")
        if fields.get("timed_out"):
            end += " (its timeout)"
        message = f"process {fields['pid']} `{fields['cmd'][:200]}` {end} " \
                  f"in {fields['duration_ms']:.0f} ms"
        level = "info" if fields.get("exit_code") == 0 else "warn"
        return EventKind.PROCESS, level, message, fields
    if kind == "envd_restarted":
        end = (f"killed by signal {fields['signal']}" if "signal" in fields
               else f"exited {fields.get('exit_code', '?')}")
        message = (f"envd {end} after {fields.get('uptime_s', 0):.1f} s and was restarted "
                   f"(restart {fields['count']})")
        return EventKind.ENVD_RESTARTED, "error", message, fields
    if fields["direction"] not in ("upload", "download"):
        raise BadReport("a transfer is an upload or a download")
    ok = fields.get("ok", False)
    message = (f"{fields['direction']} {fields.get('path', '')} {fields['bytes']} bytes "
               f"{'ok' if ok else 'failed'} ({fields.get('status', 0)})")
    return EventKind.TRANSFER, "info" if ok else "warn", message, fields


# -- the intake ----------------------------------------------------------------------------

class _Bucket:
    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens = tokens
        self.at = at


class Changes:
    """Wakes whoever waits for new events (a follow), at most once per write."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, within: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), within)


class TraceIntake:
    def __init__(self, *, sandbox_store: SandboxStore, registry: Registry,
                 settings: TraceSettings, changes: Changes,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._store = sandbox_store
        self._registry = registry
        self._settings = settings
        self._changes = changes
        self._monotonic = monotonic
        self._queue: list[EventRecord] = []
        self._buckets: dict[str, _Bucket] = {}
        self._wake = asyncio.Event()
        self.accepted = 0
        self.dropped: Counter[str] = Counter()  # by reason

    def receive(self, sandbox_id: str, data: bytes) -> None:
        """The backend's sink: never raises, never blocks."""
        sbx = self._registry.get(sandbox_id)
        if sbx is None:
            self.dropped["no sandbox"] += 1
            return
        if not self._take_token(sandbox_id):
            self.dropped["rate"] += 1
            return
        if len(self._queue) >= self._settings.queue_max:
            self.dropped["backlog"] += 1
            return
        try:
            kind, level, message, fields = parse_report(data, self._settings.max_datagram)
        except BadReport as exc:
            self.dropped[str(exc)] += 1
            return
        self._queue.append(EventRecord(
            sandbox_id=sandbox_id, team_id=sbx.team_id, at=datetime.now(UTC),
            kind=kind.value, message=message, level=level, fields=fields,
            metadata=dict(sbx.metadata)))
        self.accepted += 1
        if len(self._queue) >= self._settings.batch_max:
            self._wake.set()

    def _take_token(self, sandbox_id: str) -> bool:
        now, s = self._monotonic(), self._settings
        bucket = self._buckets.get(sandbox_id)
        if bucket is None:
            bucket = self._buckets[sandbox_id] = _Bucket(s.burst, now)
        bucket.tokens = min(s.burst, bucket.tokens + (now - bucket.at) * s.rate_per_s)
        bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def forget(self, sandbox_id: str) -> None:
        self._buckets.pop(sandbox_id, None)

    async def flush(self) -> int:
        """Write what is queued; returns how many were written."""
        batch, self._queue = self._queue, []
        if not batch:
            return 0
        try:
            await self._store.add_events(batch)
        except Exception:
            self.dropped["store"] += len(batch)
            log.exception("writing %d trace events failed", len(batch))
            return 0
        self._changes.notify()
        return len(batch)

    async def run(self) -> None:
        """Flush forever (cancel to stop; the caller flushes once more after)."""
        while True:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._settings.flush_s)
            await self.flush()


# -- reading it back ---------------------------------------------------------------------

def _kinds(raw: str | None) -> frozenset[str]:
    if not raw:
        return frozenset()
    kinds = frozenset(k.strip() for k in raw.split(",") if k.strip())
    known = {k.value for k in EventKind}
    unknown = sorted(kinds - known)
    if unknown:
        raise InvalidRequest(f"unknown event kind {unknown[0]!r}; known: "
                             + ", ".join(sorted(known)))
    return kinds


@dataclass(frozen=True)
class TraceFilter:
    kinds: frozenset[str] = frozenset()
    since: datetime | None = None
    until: datetime | None = None
    after_id: int = 0
    limit: int = 100

    @classmethod
    def of(cls, *, kinds: str | None, since: datetime | None, until: datetime | None,
           after_id: int, limit: int) -> TraceFilter:
        return cls(_kinds(kinds), since, until, after_id, max(1, min(limit, MAX_PAGE)))


@dataclass
class _NetSeen:
    bytes_out: int
    bytes_in: int
    denied: dict[tuple[str, int | None, str], int]
    at: datetime


class Traces:
    def __init__(self, *, sandbox_store: SandboxStore, registry: Registry, history: History,
                 settings: TraceSettings | None = None, backend: Backend | None = None,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.settings = settings or TraceSettings()
        self._backend = backend
        self._net: dict[str, _NetSeen] = {}
        self._started = now()
        self._store = sandbox_store
        self._registry = registry
        self._history = history
        self._now = now
        self.changes = Changes()
        self.intake = TraceIntake(sandbox_store=sandbox_store, registry=registry,
                                  settings=self.settings, changes=self.changes)
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    async def sandbox(self, team: Team, sandbox_id: str, flt: TraceFilter) -> list[EventRecord]:
        await self._history.sandbox(team, sandbox_id)  # NotFound for another team's
        return await self._store.trace(self._query(team, flt, sandbox_id=sandbox_id))

    async def run_trace(self, team: Team, metadata: dict[str, str],
                        flt: TraceFilter) -> list[EventRecord]:
        if not metadata:
            raise InvalidRequest("a run is named by at least one metadata pair key:value")
        for key in metadata:
            if not _RUN_KEY.fullmatch(key):
                raise InvalidRequest(f"metadata key {key[:60]!r} cannot name a run: use ASCII "
                                     "letters, digits and _ . - (at most 256)")
        return await self._store.trace(self._query(team, flt, metadata=metadata))

    def _query(self, team: Team, flt: TraceFilter, *, sandbox_id: str | None = None,
               metadata: dict[str, str] | None = None) -> TraceQuery:
        return TraceQuery(team_id=team.team_id, sandbox_id=sandbox_id, after_id=flt.after_id,
                          kinds=flt.kinds, since=flt.since, until=flt.until,
                          metadata=metadata or {}, limit=flt.limit)

    async def follow(self, team: Team, sandbox_id: str, flt: TraceFilter,
                     *, poll_s: float = 1.0) -> AsyncGenerator[EventRecord, None]:
        """The events after ``flt.after_id``, then each new one as it is written, until
        the sandbox has ended and its last events were given (an ended one: what it has).
        Reports from inside arrive at once; events written elsewhere within ``poll_s``."""
        await self._history.sandbox(team, sandbox_id)
        cursor = flt.after_id
        while True:
            live = self._registry.get(sandbox_id) is not None
            batch = await self._store.trace(self._query(
                team, TraceFilter(flt.kinds, flt.since, flt.until, cursor, MAX_PAGE),
                sandbox_id=sandbox_id))
            for record in batch:
                yield record
                cursor = record.event_id or cursor
            if len(batch) == MAX_PAGE:
                continue
            if not live or self._closed:
                return
            await self.changes.wait(poll_s)

    async def prune(self) -> int:
        """Apply the retention once (now as the clock says); returns how many went."""
        before = self._now() - timedelta(days=self.settings.retention_days)
        return await self._store.prune_events(
            before=before, keep_per_sandbox=self.settings.keep_per_sandbox,
            counted_kinds=IN_SANDBOX_KINDS)

    async def _prune_forever(self) -> None:
        while True:
            try:
                gone = await self.prune()
                if gone:
                    log.info("trace retention: %d event(s) pruned", gone)
            except Exception:
                log.exception("trace retention pass failed")
            await asyncio.sleep(self.settings.prune_every_s)

    async def network_once(self) -> int:
        """Read each running sandbox's egress once; returns how many events it wrote."""
        backend = self._backend
        if not isinstance(backend, NetworkControl):
            return 0
        running = [s for s in self._registry.all() if s.state is SandboxState.RUNNING]
        found = await asyncio.gather(*(backend.network_usage(s.sandbox_id) for s in running),
                                     return_exceptions=True)
        now = self._now()
        records: list[EventRecord] = []
        for sbx, usage in zip(running, found, strict=True):
            if isinstance(usage, BaseException):
                continue
            records += self._network_events(sbx, usage, now)
        for sandbox_id in set(self._net) - {s.sandbox_id for s in self._registry.all()}:
            del self._net[sandbox_id]
        if records:
            await self._store.add_events(records)
            self.changes.notify()
        return len(records)

    def _network_events(self, sbx: LiveSandbox, usage: NetworkUsage,
                        now: datetime) -> list[EventRecord]:
        denied = {(d.address, d.port, d.protocol): d for d in usage.destinations
                  if not d.allowed}
        counts = {key: d.count for key, d in denied.items()}
        seen = self._net.get(sbx.sandbox_id)
        if seen is None:
            # A sandbox already running when this server started counts from now on.
            fresh = sbx.started_at >= self._started
            seen = _NetSeen(0, 0, {}, sbx.started_at) if fresh else \
                _NetSeen(usage.internet_bytes_out, usage.internet_bytes_in, counts, now)
        if usage.internet_bytes_out < seen.bytes_out or usage.internet_bytes_in < seen.bytes_in:
            seen = _NetSeen(0, 0, {}, seen.at)  # counters restarted (a restore, a wake)
        self._net[sbx.sandbox_id] = _NetSeen(usage.internet_bytes_out, usage.internet_bytes_in,
                                             counts, now)
        out: list[EventRecord] = []

        def add(kind: EventKind, level: str, message: str, fields: dict[str, Any]) -> None:
            out.append(EventRecord(sandbox_id=sbx.sandbox_id, team_id=sbx.team_id, at=now,
                                   kind=kind.value, message=message, level=level,
                                   fields={"kind": kind.value, **fields},
                                   metadata=dict(sbx.metadata)))

        sent = usage.internet_bytes_out - seen.bytes_out
        received = usage.internet_bytes_in - seen.bytes_in
        if sent or received:
            interval = max(0.0, (now - seen.at).total_seconds())
            add(EventKind.NETWORK, "info",
                f"network: {sent} bytes out, {received} bytes in over {interval:.0f} s",
                {"bytes_out": sent, "bytes_in": received, "interval_s": round(interval, 3)})
        tried = [(key, d, d.count - seen.denied.get(key, 0)) for key, d in denied.items()]
        tried = sorted((t for t in tried if t[2] > 0), key=lambda t: -t[2])
        for (address, port, protocol), d, times in tried[:self.settings.max_denials_per_read]:
            where = d.name or address
            add(EventKind.EGRESS_DENIED, "warn",
                f"egress denied: {protocol} {where}{'' if port is None else f':{port}'}",
                {"address": address, "port": port, "protocol": protocol, "name": d.name,
                 "packets": times})
        return out

    async def _network_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.network_interval_s)
            try:
                await self.network_once()
            except Exception:
                log.exception("reading the sandboxes' egress failed")

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self.intake.run()),
                       asyncio.create_task(self._prune_forever())]
        if self.settings.network_interval_s > 0 and isinstance(self._backend, NetworkControl):
            self._tasks.append(asyncio.create_task(self._network_forever()))

    async def stop(self) -> None:
        self._closed = True  # live follows end: the server stops
        self.changes.notify()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.intake.flush()
