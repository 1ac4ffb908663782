"""Checks that fail early with advice, before the first sandbox fails obscurely."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ._errors import MissingDependency

# binary -> Debian package that provides it
REQUIRED_BINARIES = {
    "mount": "mount",
    "nsenter": "util-linux",
    "nft": "nftables",
    "mkfs.ext4": "e2fsprogs",  # each sandbox's disk (backends.namespaces.slots._disk)
}


def check_root() -> None:
    if os.geteuid() != 0:
        raise MissingDependency("sandboxes need root (namespaces, cgroups and mounts)")


def check_binaries(runtime: str) -> None:
    wanted = dict(REQUIRED_BINARIES)
    wanted[runtime] = Path(runtime).name
    missing = [f"{binary} (apt-get install {package})" for binary, package in wanted.items()
               if shutil.which(binary) is None]
    if missing:
        raise MissingDependency("missing on this host: " + ", ".join(missing)
                                + "; run scripts/setup-host.sh")


def check_kernel() -> None:
    filesystems = Path("/proc/filesystems").read_text()
    if "overlay" not in filesystems:
        raise MissingDependency("the kernel has no overlayfs (CONFIG_OVERLAY_FS)")
    max_userns = Path("/proc/sys/user/max_user_namespaces")
    if not max_userns.exists() or int(max_userns.read_text()) < 1:
        raise MissingDependency("user namespaces are disabled (sysctl user.max_user_namespaces)")
    for ns in ("user", "pid", "net", "mnt", "ipc", "uts", "cgroup"):
        if not Path(f"/proc/self/ns/{ns}").exists():
            raise MissingDependency(f"the kernel lacks {ns} namespaces")
    if not Path("/proc/self/ns/net").exists() or not hasattr(os, "pidfd_open"):
        raise MissingDependency("pidfd_open is needed (Linux >= 5.3, Python >= 3.9)")


def check_cgroup_controllers(unified: bool) -> None:
    if unified:  # cgroup v2: freezing is built in, controllers are listed at the root
        present = set(Path("/sys/fs/cgroup/cgroup.controllers").read_text().split())
        wanted = {"cpu", "memory", "pids"}
    else:
        present = {line.split()[0] for line in Path("/proc/cgroups").read_text().splitlines()
                   if line and not line.startswith("#") and line.split()[3] == "1"}
        wanted = {"cpu", "cpuacct", "memory", "pids", "freezer"}
    missing = wanted - present
    if missing:
        raise MissingDependency(f"cgroup controllers missing or disabled: {sorted(missing)}")
