"""What one server's sandboxes hold on the host, found from the outside (the kernel's
tables, its loop devices and the host-wide lease directory), to prove a server left nothing behind;
holds no tests."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

LEASES = Path("/run/bac/addresses")
CGROUPS = Path("/sys/fs/cgroup")
PARENT = "bac"


@dataclass(frozen=True)
class Footprint:
    mounts: tuple[str, ...]  # mount points under the data dir
    cgroups: tuple[str, ...]  # cgroup directories of the slots
    leases: tuple[str, ...]  # address leases naming the data dir
    veths: tuple[str, ...]  # host interfaces of the veths named
    processes: tuple[int, ...]  # live pids in the slots' cgroups
    loops: tuple[str, ...] = ()  # loop devices backed by files under the data dir

    @property
    def empty(self) -> bool:
        return not (self.mounts or self.cgroups or self.leases or self.veths
                    or self.processes or self.loops)


def leased_veths(data_dir: Path, prefix: str = "bacs") -> set[str]:
    """The veths of the leases a server on ``data_dir`` holds now."""
    found = set()
    for lease in LEASES.iterdir() if LEASES.is_dir() else []:
        try:
            if str(data_dir) in lease.read_text() and lease.name.isdigit():
                found.add(f"{prefix}{lease.name}")
        except FileNotFoundError:
            continue
    return found


def footprint(data_dir: Path, slots: set[str], veths: set[str]) -> Footprint:
    """What is still there of ``slots`` (slot names) and ``veths``, and any mount or
    lease of ``data_dir``."""
    root = str(data_dir)
    mounts = tuple(line.split()[4] for line in Path("/proc/self/mountinfo").read_text()
                   .splitlines() if line.split()[4].startswith(root))
    cgroups = tuple(str(p) for p in CGROUPS.glob(f"*/{PARENT}/*") if p.name in slots)
    cgroups += tuple(str(p) for p in CGROUPS.glob(f"unified/{PARENT}/*") if p.name in slots)
    leases = tuple(sorted(leased_veths(data_dir)))
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           check=True).stdout
    present = {line.split(":")[1].strip().split("@")[0] for line in links.splitlines()}
    processes = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            groups = Path(entry.path, "cgroup").read_text()
            state = Path(entry.path, "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        # A zombie holds nothing but its pid until its parent reaps it (the host's init,
        # for sandboxes a killed server left to it): not a leak.
        if state != "Z" and any(f"/{PARENT}/{slot}" in groups for slot in slots):
            processes.append(int(entry.name))
    loops = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            if backing.read_text().strip().startswith(root):
                loops.append(backing.parts[3])
        except OSError:
            continue
    return Footprint(mounts, tuple(sorted(set(cgroups))), leases,
                     tuple(sorted(veths & present)), tuple(processes), tuple(sorted(loops)))
