"""Periodic resource sampling: every interval, ask the backend for each running sandbox's
usage and store it, so ``GET /sandboxes/{id}/metrics`` answers from the store."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from bac_server.backends.base import Backend, BackendError
from bac_server.store import MetricRecord, MetricStore

from ._registry import Registry
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
    ) -> None:
        self._backend = backend
        self._metric_store = metric_store
        self._registry = registry
        self._interval = interval_s
        self._retention = timedelta(seconds=retention_s)

    async def sample_once(self) -> int:
        """Take one sample of every running sandbox; returns how many were stored."""
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
        await self._metric_store.add_metrics(samples)
        return len(samples)

    async def run(self) -> None:
        """Sample forever (cancel to stop); one failed round never stops the loop."""
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.sample_once()
                await self._metric_store.prune_metrics(datetime.now(UTC) - self._retention)
            except Exception:
                log.exception("metrics sampling round failed")
