"""The meter: what each sandbox is allocated while it runs and keeps on disk in saved
state, accrued on the control plane's clock and written to the store per UTC day.

A running sandbox accrues its vCPUs and memory (GiB) for every second it runs, and the
CPU time its processes used (read from the backend's counter, ``CpuMetered``: the
price table's used-CPU mode charges that instead of the vCPUs); any live sandbox accrues
the GiB-hours of the checkpoints taken of it and, while paused to disk, of the memory
state its pause wrote (``LiveSandbox.saved_bytes``). Accrual happens at each
change of a sandbox's state (the registry tells the meter, so a pause stops the compute
charge at the moment it happened), at each flush (every ``flush_s`` seconds) and before
each read, so a usage answer is exact to the moment it is asked. Each row written says up
to when its sandbox was metered: a restarted server charges the time it was down to the
sandboxes that ran through it. What accrued since the last flush is lost only if the
server dies (kill -9); a flush is every few seconds.

The CPU counter is read at each flush and read, at each change of state (the registry
tells of a pause or an end before the backend acts, so the last reading still finds the
processes) and, when the caps need it (``cpu_each_tick``), at every tick. The first
reading once a sandbox runs is its baseline: what a boot, a pool or a restore spent before
the hand-out is not the user's. A count lower than the last one is a new count (a resume
from disk restores into new cgroups). Each row keeps the last reading, so a restart charges
the CPU used while the server was down, as it charges the time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from bac_server.backends.base import CpuMetered
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
    # The memory state its pause keeps on disk (GiB; 0 unless paused to disk).
    saved_gib: float = 0.0
    pending: dict[str, Usage] = field(default_factory=dict)
    # The CPU counter (s) at the last reading while running; None: no baseline yet.
    cpu_mark: float | None = None


def day_of(at: datetime) -> str:
    return at.strftime("%Y-%m-%d")


# Told of each amount accrued: (sandbox id, team id, its metadata, the amount, when).
AccrualListener = Callable[[str, str, dict[str, str], Usage, datetime], None]


class Meter:
    def __init__(self, *, registry: Registry, clock: Clock, usage_store: UsageStore,
                 checkpoint_store: CheckpointStore, flush_s: float = 5.0,
                 cpu: CpuMetered | None = None, cpu_each_tick: bool = False) -> None:
        """``cpu``: where running sandboxes' CPU time is read (None: it is not metered);
        ``cpu_each_tick``: read it at every :meth:`tick` too (the caps' used-CPU mode),
        not only at flushes, reads and changes of state."""
        self._registry = registry
        self._cpu = cpu
        self._cpu_each_tick = cpu_each_tick
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
            self._accrue(sandbox_id, entry, now, read_cpu=self._cpu_each_tick)

    async def start(self) -> None:
        """Meter every live sandbox from when it was last metered (a restart's downtime
        included, its CPU too), then flush every ``flush_s`` seconds."""
        live = self._registry.all()
        marks = await self._store.meter_marks([s.sandbox_id for s in live])
        now = self._clock.now()
        for sbx in live:
            entry = self._entry(sbx)
            mark = marks.get(sbx.sandbox_id)
            if mark is not None and mark.until < now:
                entry.since = mark.until
            if mark is not None and mark.cpu_mark is not None \
                    and entry.state is SandboxState.RUNNING:
                # Its counter as last written: the next reading charges what ran since.
                entry.cpu_mark = mark.cpu_mark
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
            entry.saved_gib = self._saved_gib(sbx)
            if entry.state is SandboxState.RUNNING:
                entry.cpu_mark = self._read_cpu(sbx.sandbox_id)
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
        starts = sbx.state is SandboxState.RUNNING and entry.state is not SandboxState.RUNNING
        entry.state = sbx.state
        entry.saved_gib = self._saved_gib(sbx)
        if starts:
            entry.cpu_mark = self._read_cpu(sbx.sandbox_id)  # the baseline
        elif sbx.state is not SandboxState.RUNNING:
            entry.cpu_mark = None

    @staticmethod
    def _saved_gib(sbx: LiveSandbox) -> float:
        return sbx.saved_bytes / _GIB if sbx.state is SandboxState.PAUSED else 0.0

    def _read_cpu(self, sandbox_id: str) -> float | None:
        return None if self._cpu is None else self._cpu.cpu_seconds(sandbox_id)

    def _cpu_used(self, sandbox_id: str, entry: _Metered) -> float:
        """The CPU time used since the last reading (and the reading kept as the next
        baseline); 0 before a baseline or when the counter cannot be read."""
        if entry.state is not SandboxState.RUNNING:
            return 0.0
        count = self._read_cpu(sandbox_id)
        if count is None:
            return 0.0
        mark, entry.cpu_mark = entry.cpu_mark, count
        if mark is None:
            return 0.0
        return count - mark if count >= mark else count  # a lower count is a new count

    def _accrue(self, sandbox_id: str, entry: _Metered, now: datetime, *,
                read_cpu: bool = True) -> None:
        used = self._cpu_used(sandbox_id, entry) if read_cpu else 0.0
        seconds = max((now - entry.since).total_seconds(), 0.0)
        if seconds == 0 and used == 0:
            return
        if seconds:
            entry.since = now
        running = entry.state is SandboxState.RUNNING
        add = Usage(
            vcpu_seconds=entry.vcpus * seconds if running else 0.0,
            memory_gib_seconds=entry.memory_gib * seconds if running else 0.0,
            storage_gib_hours=(entry.checkpoint_gib + entry.saved_gib) * seconds / 3600,
            cpu_used_seconds=used)
        if add.empty:
            return
        day = day_of(now)
        entry.pending[day] = entry.pending.get(day, Usage()) + add
        for listener in self._listeners:
            listener(sandbox_id, entry.team_id, entry.metadata, add, now)

    @staticmethod
    def _drain(sandbox_id: str, entry: _Metered, now: datetime) -> list[UsageDelta]:
        deltas = [UsageDelta(sandbox_id, entry.team_id, day, usage, now, entry.cpu_mark)
                  for day, usage in sorted(entry.pending.items())]
        if not deltas and entry.state is SandboxState.RUNNING:
            # Nothing accrued since the last write: still say it was metered up to now (a
            # paused one accrues nothing a restart could miss).
            deltas = [UsageDelta(sandbox_id, entry.team_id, day_of(now), Usage(), now,
                                 entry.cpu_mark)]
        entry.pending = {}
        return deltas
