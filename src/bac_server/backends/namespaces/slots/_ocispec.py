"""The OCI ``config.json`` of a sandbox: namespaces, mounts, limits and privileges.

Plan first, apply in the runtime: everything the sandbox may do is decided here, in one
pure function that tests can read, and handed to the runtime as a whole.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bac_server.backends.base import ENVD_PORT
from bac_server.host import SANDBOX_DEVICES, IdRange

from ._seccomp import seccomp_profile

# The capability set of root inside the sandbox, all scoped to its user namespace.
# envd needs SETUID/SETGID (run commands as the user), CHOWN/FOWNER/DAC_OVERRIDE (files
# for any user), KILL (signal the user's processes); apt and sudo need the rest.
CAPABILITIES = [
    "CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID",
    "CAP_KILL", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID",
]

MASKED_PATHS = [
    "/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
    "/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
    "/proc/timer_stats", "/proc/vmallocinfo", "/sys/firmware", "/sys/devices/virtual/powercap",
    "/sys/kernel/debug", "/sys/kernel/security", "/sys/kernel/tracing", "/sys/kernel/config",
    "/sys/fs/bpf", "/sys/fs/cgroup", "/sys/fs/pstore", "/sys/fs/fuse/connections",
]
READONLY_PATHS = [
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
]

ENVD_MOUNT = "/opt/bac"
TRACE_MOUNT = "/run/bac"
NOFILE_LIMIT = 65536
READY_FD = 3
# (type, major, minor) the sandbox may open, everything else is denied: the host nodes the
# runtime binds in (null, zero, full, random, urandom, tty, console, ptmx; the server checks
# at start-up that they are root's) and every pts of its own devpts.
_DEVICES: list[tuple[str, int, int | None]] = [
    *(("c", node.major, node.minor) for node in SANDBOX_DEVICES), ("c", 136, None)]
# The CPU quota's period: each sandbox may use its vCPUs' worth of CPU time per 10 ms. A
# longer period (the kernel's default is 100 ms) lets a busy sandbox run on every core
# for a burst and then be throttled, and its neighbours wait through the burst: with
# 10 ms a neighbour's command p99 stayed under 2x its quiet one through a fork bomb and
# eight spinners (tests/reliability/test_noisy_neighbours.py), against up to 4.5x.
CPU_PERIOD_US = 10_000


BACKGROUND_CPU_SHARES = 16


@dataclass(frozen=True)
class Limits:
    vcpus: int
    memory_mb: int
    pids_max: int
    limit_swap: bool
    # Pooled slots start with a low CPU weight so refilling the pool never slows down
    # running sandboxes; hand-out sets the real weight.
    background: bool = False

    @property
    def cpu_shares(self) -> int:
        return BACKGROUND_CPU_SHARES if self.background else 1024 * self.vcpus

    def resources(self) -> dict[str, Any]:
        """The OCI ``linux.resources`` object (also what ``<runtime> update -r`` takes)."""
        memory = self.memory_mb * 1024 * 1024
        mem: dict[str, Any] = {"limit": memory}
        if self.limit_swap:
            mem["swap"] = memory  # memory+swap == memory: no swap
        return {
            "memory": mem,
            "cpu": {"quota": self.vcpus * CPU_PERIOD_US, "period": CPU_PERIOD_US,
                    "shares": self.cpu_shares},
            "pids": {"limit": self.pids_max},
        }


@dataclass(frozen=True)
class SandboxPlan:
    hostname: str
    rootfs: Path
    netns_path: str
    cgroup_path: str
    id_range: IdRange
    limits: Limits
    allow_setuid: bool
    envd_bundle: Path | None  # None: no /opt/bac (build steps run no envd)
    etc_dir: Path  # holds the per-sandbox hosts/hostname files bound over /etc
    recursive_sys: bool = False  # runc cannot bind /sys non-recursively in a user namespace
    # Bound read-only at /run/bac: the host's trace socket for envd (slots._trace).
    trace_dir: Path | None = None
    # (/proc or /sys file, LXCFS's file) bound read-only over it: the sandbox's own
    # memory, CPUs, load and uptime (``host.lxcfs_files``); empty without LXCFS.
    proc_files: tuple[tuple[str, Path], ...] = ()
    # envd marks its memory mergeable (the host runs KSM: ``host._ksm``).
    merge_memory: bool = False


def _bind(source: Path | str, destination: str, *extra: str) -> dict[str, Any]:
    return {"destination": destination, "type": "bind", "source": str(source),
            "options": ["rbind", "nosuid", "nodev", *extra]}


def _mounts(plan: SandboxPlan) -> list[dict[str, Any]]:
    envd = [] if plan.envd_bundle is None else [_bind(plan.envd_bundle, ENVD_MOUNT, "ro")]
    if plan.trace_dir is not None:
        envd.append(_bind(plan.trace_dir, TRACE_MOUNT, "ro", "noexec"))
    return [
        {"destination": "/proc", "type": "proc", "source": "proc",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620",
                     "gid=5"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",  # noqa: S108
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
         "options": ["nosuid", "noexec", "nodev"]},
        # A fresh sysfs cannot be mounted: the network namespace belongs to the host's
        # user namespace. The host's sysfs is bound instead, read-only; crun binds it
        # without the mounts below it (cgroup, debugfs, ...), runtimes that need a
        # recursive bind get those covered by masked paths.
        {"destination": "/sys", "type": "bind", "source": "/sys",
         "options": ["rbind" if plan.recursive_sys else "bind", "ro", "nosuid", "noexec",
                     "nodev", "relatime"]},
        *envd,
        _bind(plan.etc_dir / "hosts", "/etc/hosts"),
        _bind(plan.etc_dir / "hostname", "/etc/hostname"),
        _bind(plan.etc_dir / "resolv.conf", "/etc/resolv.conf"),
        # SECURITY: LXCFS's files, read-only; each answers from the reader's own cgroups.
        *(_bind(source, target, "ro", "noexec") for target, source in plan.proc_files),
    ]


def envd_argv() -> list[str]:
    return ["/usr/bin/python3", "-s", "-S", "-m", "bac_envd", "--port", str(ENVD_PORT),
            "--host", "0.0.0.0", "--ready-fd", str(READY_FD)]


def build_config(plan: SandboxPlan) -> dict[str, Any]:
    # The runtime cannot raise the limit above its own hard limit inside the user namespace.
    nofile = min(NOFILE_LIMIT, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    ids = [{"containerID": 0, "hostID": plan.id_range.base, "size": plan.id_range.size}]
    devices: list[dict[str, Any]] = [{"allow": False, "access": "rwm"}]
    devices += [{"allow": True, "type": kind, "major": major, "minor": minor, "access": "rwm"}
                if minor is not None else
                {"allow": True, "type": kind, "major": major, "access": "rwm"}
                for kind, major, minor in _DEVICES]
    resources = plan.limits.resources() | {"devices": devices}
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": envd_argv(),
            "env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG=C.UTF-8", "HOME=/root", f"PYTHONPATH={ENVD_MOUNT}/lib",
                "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
                *(["BAC_ENVD_MERGE=1"] if plan.merge_memory else []),
            ],
            "cwd": "/",
            "capabilities": {key: CAPABILITIES for key in ("bounding", "effective", "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": nofile, "soft": nofile}],
            # SECURITY: without setuid binaries in the template nothing may gain privileges;
            # with them (sudo) root inside stays confined by the user namespace.
            "noNewPrivileges": not plan.allow_setuid,
        },
        "root": {"path": str(plan.rootfs), "readonly": False},
        "hostname": plan.hostname,
        "mounts": _mounts(plan),
        "linux": {
            "uidMappings": ids,
            "gidMappings": ids,
            "namespaces": [
                {"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
                {"type": "cgroup"}, {"type": "user"},
                {"type": "network", "path": plan.netns_path},
            ],
            "cgroupsPath": plan.cgroup_path,
            "resources": resources,
            "seccomp": seccomp_profile(),
            "maskedPaths": MASKED_PATHS,
            "readonlyPaths": READONLY_PATHS,
            "rootfsPropagation": "private",
        },
    }
