"""Resource usage of a sandbox, from its cgroups and its overlay's upper layer.

CPU use is a rate, so the sampler remembers the previous reading per sandbox; the first
reading reports 0 %.
"""

from __future__ import annotations

import asyncio
import time

from bac_server.backends.base import ResourceUsage, SandboxNotFound

from ._context import Context
from ._files import disk_used
from ._record import SlotRecord


class UsageSampler:
    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}

    def forget(self, sandbox_id: str) -> None:
        self._last.pop(sandbox_id, None)

    async def sample(self, ctx: Context, sandbox_id: str, record: SlotRecord) -> ResourceUsage:
        try:
            stats = ctx.cgroups.cpu_memory(record.cgroup_path)
        except FileNotFoundError as exc:
            raise SandboxNotFound(f"sandbox {sandbox_id} has no cgroup (stopped)") from exc
        now = time.monotonic()
        last = self._last.get(sandbox_id)
        self._last[sandbox_id] = (now, stats.cpu_usage_ns)
        pct = 0.0
        if last is not None and now > last[0]:
            pct = (stats.cpu_usage_ns - last[1]) / ((now - last[0]) * 1e9) / record.vcpus * 100
        used = await asyncio.to_thread(disk_used, ctx.paths(record.slot).layer / "upper")
        return ResourceUsage(
            cpu_count=record.vcpus, cpu_used_pct=round(max(pct, 0.0), 2),
            mem_used_bytes=stats.mem_used, mem_total_bytes=record.memory_mb * 1024 * 1024,
            mem_cache_bytes=stats.mem_cache, disk_used_bytes=used,
            disk_total_bytes=record.disk_mb * 1024 * 1024, oom_kills=stats.oom_kills)
