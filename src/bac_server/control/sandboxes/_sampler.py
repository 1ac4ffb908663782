"""Periodic resource sampling: every interval, ask the backend for each running sandbox's
usage and store it, so ``GET /sandboxes/{id}/metrics`` answers from the store; a rise of
its OOM-kill counter between two samples is an ``oom_kill`` event in its log, and a disk
found full (its writes fail with ENOSPC) a ``disk_full`` event, once until it has room
again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from bac_server.backends.base import Backend, BackendError, ResourceUsage, SandboxStatus
from bac_server.store import MetricRecord, MetricStore, SandboxStore

from ._events import EventKind, event
from ._registry import LiveSandbox, Registry
from ._states import SandboxState

log = logging.getLogger(__name__)


class MetricsSampler:
    def __init__(
        self,
        *,
        backend: Backend,
        metric_store: MetricStore,
        registry: Registry,
        interval_s: float,
        retention_s: float,
        sandbox_store: SandboxStore | None = None,
        on_died: Callable[[LiveSandbox], Awaitable[None]] | None = None,
    ) -> None:
        """``on_died``: called for a running sandbox whose processes the backend finds
        gone (the lifecycle ends it, reason crash)."""
        self._backend = backend
        self._metric_store = metric_store
        self._sandbox_store = sandbox_store
        self._on_died = on_died
        self._registry = registry
        self._interval = interval_s
        self._retention = timedelta(seconds=retention_s)
        # OOM kills seen per sandbox. One that started before this sampler (a server
        # restart) counts from its first sample; one started since, from zero.
        self._oom: dict[str, int] = {}
        self._since = datetime.now(UTC)
        # Sandboxes whose disk was full at their last sample (one event per filling).
        self._full: set[str] = set()
        # The last sample of each running sandbox (Mission Control's fleet reads these, not
        # the store: one dict read per row).
        self._latest: dict[str, MetricRecord] = {}
        # What the backend reported with it that is not stored (processes, ports).
        self._usage: dict[str, ResourceUsage] = {}

    def latest(self, sandbox_id: str) -> MetricRecord | None:
        """The sandbox's last sample, None before its first or once it stopped running."""
        return self._latest.get(sandbox_id)

    def latest_usage(self, sandbox_id: str) -> ResourceUsage | None:
        """The backend's whole answer at that sample (process count, listening ports)."""
        return self._usage.get(sandbox_id)

    async def sample_once(self, *, record: bool = True) -> int:
        """Take one sample of every running sandbox; returns how many were stored.
        ``record`` False (an API replica that does not lead): only this process's view
        (Mission Control's live figures) is kept; the leader stores the samples and
        writes the events."""
        running = [s for s in self._registry.all() if s.state is SandboxState.RUNNING]
        results = await asyncio.gather(
            *(self._backend.usage(s.sandbox_id) for s in running), return_exceptions=True
        )
        now = datetime.now(UTC)
        samples = []
        for sbx, usage in zip(running, results, strict=True):
            if isinstance(usage, BaseException):
                if not isinstance(usage, BackendError):
                    log.warning("usage of %s failed: %r", sbx.sandbox_id, usage)
                continue
            samples.append(
                MetricRecord(
                    sandbox_id=sbx.sandbox_id,
                    at=now,
                    cpu_count=usage.cpu_count,
                    cpu_used_pct=usage.cpu_used_pct,
                    mem_used=usage.mem_used_bytes,
                    mem_total=usage.mem_total_bytes,
                    mem_cache=usage.mem_cache_bytes,
                    disk_used=usage.disk_used_bytes,
                    disk_total=usage.disk_total_bytes,
                )
            )
        if record:
            await self._metric_store.add_metrics(samples)
        self._latest = {sample.sandbox_id: sample for sample in samples}
        self._usage = {sbx.sandbox_id: usage for sbx, usage in zip(running, results, strict=True)
                       if not isinstance(usage, BaseException)}
        if not record:
            return 0
        for sbx, usage in zip(running, results, strict=True):
            if not isinstance(usage, BaseException):
                await self._oom_check(sbx, usage.oom_kills)
                await self._disk_check(sbx, usage)
        if self._on_died is not None:
            await self._find_dead(running)
        gone = set(self._oom) - {s.sandbox_id for s in self._registry.all()}
        for sandbox_id in gone:
            del self._oom[sandbox_id]
        self._full &= {s.sandbox_id for s in self._registry.all()}
        return len(samples)

    async def _find_dead(self, running: list[LiveSandbox]) -> None:
        assert self._on_died is not None
        states = await asyncio.gather(*(self._backend.status(s.sandbox_id) for s in running),
                                      return_exceptions=True)
        for sbx, status in zip(running, states, strict=True):
            if status is SandboxStatus.STOPPED:
                try:
                    await self._on_died(sbx)
                except Exception:
                    log.exception("ending dead sandbox %s failed", sbx.sandbox_id)

    async def _oom_check(self, sbx: LiveSandbox, kills: int) -> None:
        seen = self._oom.get(sbx.sandbox_id)
        if seen is None:
            seen = 0 if sbx.started_at >= self._since else kills
        self._oom[sbx.sandbox_id] = kills
        if kills <= seen or self._sandbox_store is None:
            return
        new = kills - seen
        await self._sandbox_store.add_event(event(
            sbx.sandbox_id, sbx.team_id, EventKind.OOM_KILL,
            f"the kernel's OOM killer ended {new} process{'es' if new > 1 else ''} "
            f"(memory limit {sbx.memory_mb} MiB)", level="error", count=str(new),
            total=str(kills), memory_mb=str(sbx.memory_mb)))

    async def _disk_check(self, sbx: LiveSandbox, usage: ResourceUsage) -> None:
        if not usage.disk_full:
            self._full.discard(sbx.sandbox_id)
            return
        if sbx.sandbox_id in self._full or self._sandbox_store is None:
            return
        self._full.add(sbx.sandbox_id)
        mib = 1024 * 1024
        inodes = usage.disk_inodes_total > 0 and \
            usage.disk_inodes_used >= usage.disk_inodes_total
        what = f"all {usage.disk_inodes_total} files" if inodes else \
            f"{usage.disk_used_bytes // mib} of {usage.disk_total_bytes // mib} MiB"
        await self._sandbox_store.add_event(event(
            sbx.sandbox_id, sbx.team_id, EventKind.DISK_FULL,
            f"the sandbox's disk is full ({what}): writes fail with 'No space left on "
            "device'", level="error", used_bytes=str(usage.disk_used_bytes),
            total_bytes=str(usage.disk_total_bytes),
            inodes_used=str(usage.disk_inodes_used),
            inodes_total=str(usage.disk_inodes_total), disk_mb=str(sbx.disk_mb)))

    async def run(self, *, record: bool = True) -> None:
        """Sample forever (cancel to stop); one failed round never stops the loop.
        ``record``: as ``sample_once``'s."""
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.sample_once(record=record)
                if record:
                    await self._metric_store.prune_metrics(
                        datetime.now(UTC) - self._retention)
            except Exception:
                log.exception("metrics sampling round failed")
