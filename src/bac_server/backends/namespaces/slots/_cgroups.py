"""A slot's cgroups as files: processes, freezing, removal and usage counters.

The runtime creates and limits the cgroups; this module only reads them, freezes them
for a clean kill, and removes what a crashed runtime left behind. Cgroup v1 (per-controller
hierarchies) and v2 (unified) are both handled.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path

from bac_server.host import CgroupLayout, cgroup_layout, controller_dirs, supports_swap_limit

from ._ocispec import CPU_PERIOD_US as _PERIOD_US
from ._ocispec import Limits


@dataclass(frozen=True)
class CpuMemory:
    cpu_usage_ns: int
    mem_used: int
    mem_limit: int
    mem_cache: int
    oom_kills: int = 0  # processes the kernel's OOM killer ended in the cgroup, ever


class CgroupTree:
    def __init__(self) -> None:
        self.layout = cgroup_layout()
        self.supports_swap = supports_swap_limit(self.layout)
        self._roots = {name: path.parent
                       for name, path in controller_dirs(self.layout, "x").items()}

    def dirs(self, relative: str) -> dict[str, Path]:
        rel = relative.strip("/")
        return {name: root / rel for name, root in self._roots.items()}

    def _one(self, relative: str, controller: str) -> Path:
        root = self._roots["unified" if self.layout is CgroupLayout.V2 else controller]
        return root / relative.strip("/")

    def procs(self, relative: str) -> set[int]:
        found: set[int] = set()
        for path in self.dirs(relative).values():
            with contextlib.suppress(FileNotFoundError, OSError):
                found.update(int(line) for line in (path / "cgroup.procs").read_text().split())
        return found

    def set_frozen(self, relative: str, frozen: bool) -> bool:
        """Freeze or thaw; False if the cgroup is gone."""
        try:
            target = self._one(relative, "freezer")
            if self.layout is CgroupLayout.V2:
                (target / "cgroup.freeze").write_text("1" if frozen else "0")
            else:
                (target / "freezer.state").write_text("FROZEN" if frozen else "THAWED")
        except FileNotFoundError:
            return False
        return True

    def is_frozen(self, relative: str) -> bool:
        try:
            if self.layout is CgroupLayout.V2:
                events = (self._one(relative, "freezer") / "cgroup.events").read_text()
                return "frozen 1" in events
            state = (self._one(relative, "freezer") / "freezer.state").read_text().strip()
        except FileNotFoundError:
            return False
        return state in ("FROZEN", "FREEZING")

    def remove(self, relative: str) -> list[str]:
        """rmdir the cgroup in every hierarchy; returns those still busy."""
        busy: list[str] = []
        for name, path in self.dirs(relative).items():
            try:
                # SECURITY: only the slot's own cgroup below Bac's parent is removed.
                os.rmdir(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno == errno.EBUSY:
                    busy.append(name)
                else:
                    raise
        return busy

    def process_count(self, relative: str) -> int:
        """Processes in the cgroup (threads not counted): one read of its pids
        hierarchy's ``cgroup.procs``; 0 when the cgroup is gone."""
        try:
            text = (self._one(relative, "pids") / "cgroup.procs").read_text()
        except (FileNotFoundError, KeyError):
            return 0
        return len(text.split())

    def cpu_usage_ns(self, relative: str) -> int:
        """The cgroup's CPU time so far, in ns (one small read; FileNotFoundError when
        the cgroup is gone)."""
        if self.layout is CgroupLayout.V2:
            return _kv(self._one(relative, "memory") / "cpu.stat").get("usage_usec", 0) * 1000
        return int((self._one(relative, "cpuacct") / "cpuacct.usage").read_text())

    def cpu_memory(self, relative: str) -> CpuMemory:
        if self.layout is CgroupLayout.V2:
            base = self._one(relative, "memory")
            stat = _kv(base / "cpu.stat")
            mem = _kv(base / "memory.stat")
            limit_raw = (base / "memory.max").read_text().strip()
            return CpuMemory(
                cpu_usage_ns=stat.get("usage_usec", 0) * 1000,
                mem_used=int((base / "memory.current").read_text()),
                mem_limit=0 if limit_raw == "max" else int(limit_raw),
                mem_cache=mem.get("file", 0),
                oom_kills=_kv(base / "memory.events").get("oom_kill", 0))
        mem_dir = self._one(relative, "memory")
        mem = _kv(mem_dir / "memory.stat")
        return CpuMemory(
            cpu_usage_ns=int((self._one(relative, "cpuacct") / "cpuacct.usage").read_text()),
            mem_used=int((mem_dir / "memory.usage_in_bytes").read_text()),
            mem_limit=int((mem_dir / "memory.limit_in_bytes").read_text()),
            mem_cache=mem.get("cache", mem.get("total_cache", 0)),
            oom_kills=_kv(mem_dir / "memory.oom_control").get("oom_kill", 0))

    def apply(self, relative: str, limits: Limits) -> None:
        """Set CPU, memory and pids limits of a running slot (what ``<runtime> update``
        would write, without the cost of running the runtime)."""
        memory = limits.memory_mb * 1024 * 1024
        quota = f"{limits.vcpus * _PERIOD_US}"
        if self.layout is CgroupLayout.V2:
            base = self._one(relative, "memory")
            weight = 1 + ((limits.cpu_shares - 2) * 9999) // 262142
            writes = [(base / "cpu.max", f"{quota} {_PERIOD_US}"),
                      (base / "cpu.weight", str(weight)), (base / "pids.max", str(limits.pids_max))]
            writes += [(base / "memory.max", str(memory))]
            if limits.limit_swap:
                writes.append((base / "memory.swap.max", "0"))
        else:
            cpu = self._one(relative, "cpu")
            mem = self._one(relative, "memory")
            writes = [(cpu / "cpu.cfs_period_us", str(_PERIOD_US)),
                      (cpu / "cpu.cfs_quota_us", quota),
                      (cpu / "cpu.shares", str(limits.cpu_shares)),
                      (self._one(relative, "pids") / "pids.max", str(limits.pids_max))]
            limit_file = mem / "memory.limit_in_bytes"
            swap_file = mem / "memory.memsw.limit_in_bytes"
            current = int(limit_file.read_text())
            # v1 requires memory <= memory+swap at every moment: order the two writes.
            pair = [(limit_file, str(memory))]
            if limits.limit_swap:
                pair = [(swap_file, str(memory)), *pair] if memory > current \
                    else [*pair, (swap_file, str(memory))]
            writes += pair
        for path, value in writes:
            # SECURITY: only the slot's own cgroup files below Bac's parent are written.
            path.write_text(value)

    def read(self, relative: str, controller: str, name: str) -> str:
        return (self._one(relative, controller) / name).read_text().strip()


def _kv(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[key] = int(value)
    return out
