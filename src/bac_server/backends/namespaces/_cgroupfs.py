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


@dataclass(frozen=True)
class CpuMemory:
    cpu_usage_ns: int
    mem_used: int
    mem_limit: int
    mem_cache: int


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
        dirs = self.dirs(relative)
        return dirs["unified"] if self.layout is CgroupLayout.V2 else dirs[controller]

    def procs(self, relative: str) -> set[int]:
        found: set[int] = set()
        for path in self.dirs(relative).values():
            with contextlib.suppress(FileNotFoundError, OSError):
                found.update(int(line) for line in (path / "cgroup.procs").read_text().split())
        return found

    def exists(self, relative: str) -> bool:
        return any(path.is_dir() for path in self.dirs(relative).values())

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
                mem_cache=mem.get("file", 0))
        mem_dir = self._one(relative, "memory")
        mem = _kv(mem_dir / "memory.stat")
        return CpuMemory(
            cpu_usage_ns=int((self._one(relative, "cpuacct") / "cpuacct.usage").read_text()),
            mem_used=int((mem_dir / "memory.usage_in_bytes").read_text()),
            mem_limit=int((mem_dir / "memory.limit_in_bytes").read_text()),
            mem_cache=mem.get("cache", mem.get("total_cache", 0)))

    def read(self, relative: str, controller: str, name: str) -> str:
        return (self._one(relative, controller) / name).read_text().strip()


def _kv(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[key] = int(value)
    return out
