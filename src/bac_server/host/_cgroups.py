"""Which cgroup layout the host has, and the one change crun needs on hybrid hosts.

crun refuses "hybrid" hosts (v1 controllers plus a cgroup2 mount that still owns a
controller): ``cgroups in hybrid mode not supported, drop all controllers from cgroupv2``.
The measured workaround binds every controller still owned by the v2 hierarchy (on the
reference machine only ``hugetlb``) to its own v1 mount at ``/sys/fs/cgroup/<name>``; the
path matters, runc breaks at any other. Pure v1 and pure v2 hosts need nothing.
"""

from __future__ import annotations

import enum
import logging
import subprocess
from pathlib import Path

from ._errors import HostChangeFailed, MissingDependency
from ._mounts import mount_table

_log = logging.getLogger(__name__)
CGROUP_ROOT = Path("/sys/fs/cgroup")


class CgroupLayout(enum.Enum):
    V1 = "v1"  # controllers on per-controller v1 mounts (possibly with an empty v2 mount)
    V2 = "v2"  # unified hierarchy mounted at /sys/fs/cgroup
    HYBRID = "hybrid"  # v1 mounts plus a v2 mount that still owns controllers (crun fails)


def unified_mount() -> Path | None:
    for entry in mount_table():
        if entry.fs_type == "cgroup2" and entry.mount_point.startswith(str(CGROUP_ROOT)):
            return Path(entry.mount_point)
    return None


def _v2_controllers(mount: Path) -> list[str]:
    try:
        return (mount / "cgroup.controllers").read_text().split()
    except OSError:
        return []


def cgroup_layout() -> CgroupLayout:
    unified = unified_mount()
    if unified == CGROUP_ROOT:
        return CgroupLayout.V2
    if not any(e.fs_type == "cgroup" for e in mount_table()):
        raise MissingDependency(f"no cgroup hierarchy is mounted under {CGROUP_ROOT}")
    if unified is not None and _v2_controllers(unified):
        return CgroupLayout.HYBRID
    return CgroupLayout.V1


def ensure_crun_compatible_cgroups() -> CgroupLayout:
    """Move controllers off a hybrid host's v2 mount so crun accepts it. Idempotent."""
    layout = cgroup_layout()
    if layout is not CgroupLayout.HYBRID:
        return layout
    unified = unified_mount()
    assert unified is not None
    for name in _v2_controllers(unified):
        target = CGROUP_ROOT / name
        _log.info("binding cgroup controller %s to a v1 hierarchy at %s", name, target)
        target.mkdir(exist_ok=True)
        # SECURITY: only adds a v1 mount of a controller no cgroup uses yet; limits of
        # existing cgroups are untouched. Reversible (see docs/security.md).
        done = subprocess.run(
            ["mount", "-t", "cgroup", "-o", name, "cgroup", str(target)],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise HostChangeFailed(
                f"could not mount the {name} cgroup controller at {target}: "
                f"{done.stderr.strip()} (is it in use by a cgroup v2 group?)"
            )
    layout = cgroup_layout()
    if layout is CgroupLayout.HYBRID:
        raise HostChangeFailed("the cgroup v2 mount still owns controllers after the workaround")
    return layout


def controller_dirs(layout: CgroupLayout, relative: str) -> dict[str, Path]:
    """Per-controller directories of the cgroup ``relative`` (e.g. ``bac/s1``)."""
    rel = relative.strip("/")
    if layout is CgroupLayout.V2:
        return {"unified": CGROUP_ROOT / rel}
    found: dict[str, Path] = {}
    for entry in mount_table():
        if entry.fs_type != "cgroup" or not entry.mount_point.startswith(str(CGROUP_ROOT)):
            continue
        for option in entry.super_options.split(","):
            if option in {"cpu", "cpuacct", "memory", "pids", "freezer", "devices", "cpuset",
                          "blkio", "hugetlb", "net_cls", "net_prio", "perf_event", "rdma",
                          "misc"} or option.startswith("name="):
                found.setdefault(option, Path(entry.mount_point) / rel)
    unified = unified_mount()
    if unified is not None:
        found["unified"] = unified / rel
    return found


def supports_swap_limit(layout: CgroupLayout) -> bool:
    """Whether memory+swap can be limited (v1 needs swap accounting compiled in and on)."""
    if layout is CgroupLayout.V2:
        return True
    return (CGROUP_ROOT / "memory" / "memory.memsw.limit_in_bytes").exists()
