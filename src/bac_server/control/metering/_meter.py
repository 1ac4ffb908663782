"""The meter: what each sandbox is allocated while it runs and keeps on disk in saved
state, accrued on the control plane's clock and written to the store per UTC day.

A running sandbox accrues its vCPUs and memory (GiB) for every second it runs; any live
sandbox accrues the GiB-hours of the checkpoints taken of it. Accrual happens at each
change of a sandbox's state (the registry tells the meter, so a pause stops the compute
charge at the moment it happened), at each flush (every ``flush_s`` seconds) and before
each read, so a usage answer is exact to the moment it is asked. Each row written says up
to when its sandbox was metered: a restarted server charges the time it was down to the
sandboxes that ran through it. What accrued since the last flush is lost only if the
server dies (kill -9); a flush is every few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from bac_server.store import CheckpointStore, Usage, UsageDelta, UsageQuery, UsageStore

from ..clock import Clock, sleep
from ..sandboxes import LIVE_STATES, LiveSandbox, Registry, SandboxState

log = logging.getLogger(__name__)

_GIB = 1024 ** 3


@dataclass
class _Metered:
    team_id: str
    metadata: dict[str, str]
    state: SandboxState
    vcpus: int
    memory_gib: float
    since: datetime
    checkpoint_gib: float = 0.0
    pending: dict[str, Usage] = field(default_factory=dict)


def day_of(at: datetime) -> str:
    return at.strftime("%Y-%m-%d")


# Told of each amount accrued: (sandbox id, team id, its metadata, the amount, when).
AccrualListener = Callable[[str, str, dict[str, str], Usage, datetime], None]


class Meter:
    def __init__(self, *, registry: Registry, clock: Clock, usage_store: UsageStore,
                 checkpoint_store: CheckpointStore, flush_s: float = 5.0) -> None:
        self._registry = registry
        self._clock = clock
        self._store = usage_store
        self._checkpoints = checkpoint_store
        self._flush_s = flush_s
        self._metered: dict[str, _Metered] = {}
        # Usage of sandboxes gone since the last flush, still to be written.
        self._ended: list[UsageDelta] = []
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._listeners: list[AccrualListener] = []
        registry.on_change(self._changed)

    def on_accrue(self, listener: AccrualListener) -> None:
        """Call ``listener`` with every amount as it accrues (the cost caps)."""
        self._listeners.append(listener)

    def tick(self) -> None:
        """Accrue every live sandbox up to now (nothing is written)."""
        now = self._clock.now()
        for sandbox_id, entry in self._metered.items():
            self._accrue(sandbox_id, entry, now)

    async def start(self) -> None:
        """Meter every live sandbox from when it was last metered (a restart's downtime
        included), then flush every ``flush_s`` seconds."""
        live = self._registry.all()
        until = await self._store.metered_until([s.sandbox_id for s in live])
        now = self._clock.now()
        for sbx in live:
            entry = self._entry(sbx)
            last = until.get(sbx.sandbox_id)
            if last is not None and last < now:
                entry.since = last
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()

    async def usage(self, query: UsageQuery) -> list[tuple[str, Usage]]:
        """The store's sums, with everything accrued up to now written first."""
        await self.flush()
        return await self._store.usage(query)

    async def settled(self, query: UsageQuery,
                      before_read: Callable[[], None]) -> list[tuple[str, Usage]]:
        """The store's sums with everything accrued up to now in them: ``before_read``
        is called once all of it is written, and what accrues after (while the sums are
        read) reaches the listeners but not the sums (a cap's start, counted once)."""
        async with self._lock:
            await self._flush()
            before_read()
            return await self._store.usage(query)

    async def flush(self) -> None:
        async with self._lock:
            await self._flush()

    async def _flush(self) -> None:
        await self._refresh_checkpoints()
        now = self._clock.now()
        deltas = self._ended
        self._ended = []
        for sandbox_id, entry in self._metered.items():
            self._accrue(sandbox_id, entry, now)
            deltas.extend(self._drain(sandbox_id, entry, now))
        try:
            await self._store.add_usage(deltas)
        except BaseException:
            self._ended.extend(deltas)  # written at the next flush
            raise

    async def _run(self) -> None:
        while True:
            await sleep(self._clock, self._flush_s)
            try:
                await self.flush()
            except Exception:
                log.exception("writing usage failed; it is written at the next flush")

    async def _refresh_checkpoints(self) -> None:
        sizes = await self._checkpoints.bytes_by_sandbox()
        now = self._clock.now()
        for sandbox_id, entry in self._metered.items():
            gib = sizes.get(sandbox_id, 0) / _GIB
            if gib != entry.checkpoint_gib:
                self._accrue(sandbox_id, entry, now)  # the old size up to now
                entry.checkpoint_gib = gib

    def _entry(self, sbx: LiveSandbox) -> _Metered:
        entry = self._metered.get(sbx.sandbox_id)
        if entry is None:
            entry = _Metered(sbx.team_id, dict(sbx.metadata), sbx.state, sbx.cpu_count,
                             sbx.memory_mb / 1024, self._clock.now())
            self._metered[sbx.sandbox_id] = entry
        return entry

    def _changed(self, sbx: LiveSandbox) -> None:
        """A sandbox was added, changed state or ended: what it accrued in its previous
        state is counted up to now."""
        now = self._clock.now()
        if sbx.state not in LIVE_STATES:
            entry = self._metered.pop(sbx.sandbox_id, None)
            if entry is not None:
                self._accrue(sbx.sandbox_id, entry, now)
                self._ended.extend(self._drain(sbx.sandbox_id, entry, now))
            return
        entry = self._entry(sbx)
        self._accrue(sbx.sandbox_id, entry, now)
        entry.state = sbx.state

    def _accrue(self, sandbox_id: str, entry: _Metered, now: datetime) -> None:
        seconds = (now - entry.since).total_seconds()
        if seconds <= 0:
            return
        entry.since = now
        running = entry.state is SandboxState.RUNNING
        add = Usage(
            vcpu_seconds=entry.vcpus * seconds if running else 0.0,
            memory_gib_seconds=entry.memory_gib * seconds if running else 0.0,
            storage_gib_hours=entry.checkpoint_gib * seconds / 3600)
        if add.empty:
            return
        day = day_of(now)
        entry.pending[day] = entry.pending.get(day, Usage()) + add
        for listener in self._listeners:
            listener(sandbox_id, entry.team_id, entry.metadata, add, now)

    @staticmethod
    def _drain(sandbox_id: str, entry: _Metered, now: datetime) -> list[UsageDelta]:
        deltas = [UsageDelta(sandbox_id, entry.team_id, day, usage, now)
                  for day, usage in sorted(entry.pending.items())]
        if not deltas and entry.state is SandboxState.RUNNING:
            # Nothing accrued since the last write: still say it was metered up to now (a
            # paused one accrues nothing a restart could miss).
            deltas = [UsageDelta(sandbox_id, entry.team_id, day_of(now), Usage(), now)]
        entry.pending = {}
        return deltas
