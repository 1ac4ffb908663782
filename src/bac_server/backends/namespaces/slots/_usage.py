"""Resource usage of a sandbox, from its cgroups and its disk's own counters (``_disk``:
one ``statvfs``, however many files it holds; slots of older servers, without a disk of
their own, are measured by walking their upper layer); its network link's byte counters
(sysfs) and last destinations (the egress logs in memory).

CPU use is a rate, so the sampler remembers the previous reading per sandbox; the first
reading reports 0 %.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from bac_server.backends.base import ResourceUsage, SandboxNotFound

from ..network import link_traffic
from ._context import Context
from ._disk import DiskUsage, disk_usage
from ._files import disk_used
from ._ports import listening_ports
from ._record import SlotRecord

RECENT_DESTINATIONS = 3  # in each sample (Mission Control's fleet shows them)


class UsageSampler:
    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}

    def forget(self, sandbox_id: str) -> None:
        self._last.pop(sandbox_id, None)

    async def sample(self, ctx: Context, sandbox_id: str, record: SlotRecord) -> ResourceUsage:
        # The file reads in a worker thread: a sampler asking for a thousand sandboxes at
        # once never holds the event loop for the whole round (creates and commands wait
        # behind it otherwise). What the egress path keeps in memory is read back here.
        usage = await asyncio.to_thread(self._read, ctx, sandbox_id, record)
        return dataclasses.replace(usage, recent_destinations=ctx.egress.recent(
            record.veth, RECENT_DESTINATIONS))

    def _read(self, ctx: Context, sandbox_id: str, record: SlotRecord) -> ResourceUsage:
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
        paths = ctx.paths(record.slot)
        disk = disk_usage(paths)
        if disk is None:
            disk = DiskUsage(
                used_bytes=disk_used(paths.layer / "upper"),
                total_bytes=record.disk_mb * 1024 * 1024, free_bytes=0, inodes_used=0,
                inodes_total=0)
            full = False
        else:
            full = disk.full
        sent, received = link_traffic(record.veth)
        return ResourceUsage(
            cpu_count=record.vcpus, cpu_used_pct=round(max(pct, 0.0), 2),
            mem_used_bytes=stats.mem_used, mem_total_bytes=record.memory_mb * 1024 * 1024,
            mem_cache_bytes=stats.mem_cache, disk_used_bytes=disk.used_bytes,
            disk_total_bytes=disk.total_bytes, oom_kills=stats.oom_kills,
            disk_inodes_used=disk.inodes_used, disk_inodes_total=disk.inodes_total,
            disk_full=full, processes=ctx.cgroups.process_count(record.cgroup_path),
            listening_ports=() if record.init_pid is None else listening_ports(
                record.init_pid, record.init_start),
            net_bytes_out=sent, net_bytes_in=received)
