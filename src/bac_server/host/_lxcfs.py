"""LXCFS: ``/proc`` files that show a sandbox its own limits, not the host's.

LXCFS (Debian's ``lxcfs``) is a FUSE file system whose ``proc/meminfo``, ``cpuinfo``,
``stat``, ``uptime``, ``loadavg``, ``diskstats`` and ``swaps`` answer each reader from its
own cgroups: the memory limit as ``MemTotal`` (so ``free`` shows it), as many CPUs as its
CPU quota allows (``--enable-cfs``), its own load and uptime; its
``sys/devices/system/cpu/online`` lists as many CPUs, which is what ``os.cpu_count()``
reads. Slots bind them over ``/proc`` and ``/sys`` (``backends.namespaces.slots._ocispec``)
when they are there.

It is cosmetic, not isolation: a sandbox without it sees the host's totals (as before),
so everything here fails open. ``ensure_lxcfs`` (part of ``prepare_host``) starts the
daemon when it is not mounted: through systemd's ``lxcfs.service`` where systemd runs,
so it outlives the server's unit, else as a daemon of its own session (CI, containers).
A stale mount (the daemon died: every read answers ``ENOTCONN``) is detached first.
Sandboxes started while it was down keep the host's files; sandboxes that bound it
while it died see ``ENOTCONN`` on those files until they end (LXCFS cannot be re-bound
under a running sandbox).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from ._syscalls import MNT_DETACH, umount

_log = logging.getLogger(__name__)

LXCFS_DIR = Path("/var/lib/lxcfs")
# What slots bind over /proc: the files runc and crun allow a mount over.
PROC_FILES = ("cpuinfo", "diskstats", "loadavg", "meminfo", "stat", "swaps", "uptime")
# glibc's get_nprocs (``os.cpu_count()``, ``getconf _NPROCESSORS_ONLN``, thread pools
# sized by it) reads this, not /proc: LXCFS answers it from the CPU quota too.
SYS_FILES = ("/sys/devices/system/cpu/online",)
_FUSE_SUPER_MAGIC = 0x65735546
_START_BOUND_S = 5.0


class _StatFs(ctypes.Structure):
    # struct statfs begins with f_type; the rest is room the kernel fills.
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 128)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _fuse_mounted(directory: Path) -> bool:
    """Whether a FUSE file system is mounted at ``directory`` (one ``statfs``)."""
    buf = _StatFs()
    if _libc.statfs(str(directory).encode(), ctypes.byref(buf)) != 0:
        return False
    return int(buf.f_type) & 0xFFFFFFFF == _FUSE_SUPER_MAGIC


def lxcfs_files(directory: Path = LXCFS_DIR) -> dict[str, Path]:
    """The file in the sandbox → LXCFS's file, for each one LXCFS serves now (its /proc
    files and ``SYS_FILES``); {} without it."""
    if not _fuse_mounted(directory):
        return {}
    wanted = [f"/proc/{name}" for name in PROC_FILES] + list(SYS_FILES)
    found = {}
    for target in wanted:
        path = directory / target.lstrip("/")
        try:
            os.stat(path)
        except OSError:
            continue
        found[target] = path
    return found


def _stale(directory: Path) -> bool:
    try:
        os.stat(directory / "proc")
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def _start_with_systemd() -> bool:
    systemctl = shutil.which("systemctl")
    if systemctl is None or not Path("/run/systemd/system").is_dir():
        return False
    started = subprocess.run([systemctl, "start", "lxcfs.service"], capture_output=True,
                             text=True, timeout=30, check=False)
    if started.returncode != 0:
        _log.warning("lxcfs: systemctl start lxcfs failed: %s", started.stderr.strip())
    return started.returncode == 0


def _start_daemon(binary: str, directory: Path, log: Path) -> None:
    setsid = shutil.which("setsid")
    argv = [binary, "--enable-cfs", "--enable-pidfd", "--enable-loadavg", str(directory)]
    with open(log, "ab") as out:
        # SECURITY: the host's LXCFS as its package runs it (root, its default pid file);
        # in a session of its own (setsid -f forks it away), so it outlives this server.
        subprocess.run([setsid, "-f", *argv] if setsid else argv, stdin=subprocess.DEVNULL,
                       stdout=out, stderr=out, timeout=30, check=True, close_fds=True)


def ensure_lxcfs(directory: Path = LXCFS_DIR, log: Path = Path("/run/bac/lxcfs.log")
                 ) -> bool:
    """Mount LXCFS at ``directory`` unless it is; True once it serves (fails open: a
    warning and False when it cannot)."""
    if lxcfs_files(directory):
        return True
    binary = shutil.which("lxcfs")
    if binary is None or not Path("/dev/fuse").exists():
        _log.warning("lxcfs is not installed (apt-get install lxcfs): sandboxes see the "
                     "host's memory and CPUs in /proc")
        return False
    try:
        if _stale(directory):
            # SECURITY: only the dead FUSE mount at LXCFS's own directory is detached.
            umount(str(directory), MNT_DETACH)
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _start_with_systemd():
            _start_daemon(binary, directory, log)
    except (OSError, subprocess.SubprocessError) as exc:
        _log.warning("lxcfs could not be started: %s; sandboxes see the host's memory and "
                     "CPUs in /proc", exc)
        return False
    deadline = time.monotonic() + _START_BOUND_S
    while time.monotonic() < deadline:
        if lxcfs_files(directory):
            _log.info("lxcfs serving at %s", directory)
            return True
        # Not a synchronisation between our own parts: the daemon mounts when it is ready
        # and says so nowhere else.
        time.sleep(0.01)
    _log.warning("lxcfs did not mount %s within %.0f s (see %s); sandboxes see the host's "
                 "memory and CPUs in /proc", directory, _START_BOUND_S, log)
    return False
