"""``GET /metrics``: CPU, memory and disk use as seen from inside the sandbox.

Memory and CPU limits come from the sandbox's own cgroup when one is visible (cgroup v2
``memory.max``/``cpu.max`` or v1 ``memory.limit_in_bytes``), because ``/proc/meminfo``
and the CPU count describe the host in a namespace sandbox.
"""

from __future__ import annotations

import math
import os
import time

_CGROUP = "/sys/fs/cgroup"
_last_cpu: tuple[float, float] | None = None  # (busy, total) jiffies of the previous call


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    if text is None or not text.isdigit():
        return None
    return int(text)


def _meminfo() -> dict[str, int]:
    info: dict[str, int] = {}
    text = _read("/proc/meminfo") or ""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            info[key] = int(fields[0]) * 1024
    return info


def _memory() -> tuple[int, int, int]:
    """(total, used, cache) in bytes."""
    info = _meminfo()
    host_total = info.get("MemTotal", 0)
    limit = _int(_read(f"{_CGROUP}/memory.max")) or _int(
        _read(f"{_CGROUP}/memory/memory.limit_in_bytes")
    )
    usage = _int(_read(f"{_CGROUP}/memory.current")) or _int(
        _read(f"{_CGROUP}/memory/memory.usage_in_bytes")
    )
    if usage is not None:
        total = min(limit, host_total) if limit else host_total
        return total, usage, 0
    cache = info.get("Cached", 0) + info.get("Buffers", 0)
    used = host_total - info.get("MemAvailable", 0)
    return host_total, used, cache


def _cpu_count() -> int:
    quota = (_read(f"{_CGROUP}/cpu.max") or "").split()
    if len(quota) == 2 and quota[0].isdigit() and quota[1].isdigit() and int(quota[1]):
        return max(1, math.ceil(int(quota[0]) / int(quota[1])))
    return os.cpu_count() or 1


def _cpu_used_pct() -> float:
    global _last_cpu
    line = (_read("/proc/stat") or "").split("\n", 1)[0].split()
    if len(line) < 5 or line[0] != "cpu":
        return 0.0
    values = [float(v) for v in line[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0.0)
    total = sum(values[:8])
    busy = total - idle
    previous, _last_cpu = _last_cpu, (busy, total)
    if previous is None or total <= previous[1]:
        return round(100.0 * busy / total, 2) if total else 0.0
    return round(100.0 * (busy - previous[0]) / (total - previous[1]), 2)


def sample() -> dict[str, float | int]:
    total, used, cache = _memory()
    disk = os.statvfs("/")
    disk_total = disk.f_blocks * disk.f_frsize
    disk_used = (disk.f_blocks - disk.f_bfree) * disk.f_frsize
    mib = 1024 * 1024
    return {
        "ts": int(time.time()),
        "cpu_count": _cpu_count(),
        "cpu_used_pct": _cpu_used_pct(),
        "mem_total": total,
        "mem_used": used,
        "mem_cache": cache,
        "mem_total_mib": total // mib,
        "mem_used_mib": used // mib,
        "disk_used": disk_used,
        "disk_total": disk_total,
    }
