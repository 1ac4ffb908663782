"""CRIU, the tool that saves and restores process trees: finding it, and its host setup.

``find_criu`` locates a CRIU recent enough for this kernel (``scripts/build-criu.sh``
installs one): 4.1 is needed on kernels >= 6.13 (vDSO layout) and 4.2 on kernels >= 6.16
(inet sockets refuse ``SO_PASSCRED``, which older versions query on every socket). The
build script also patches it (``scripts/criu/``), and each patch names itself as a
``criu check --feature``; the newest (``tcp_close_external``) stands for them all. With
them Bac drives CRIU itself instead of through runc (``Criu.direct``, see
``_dump``), established TCP connections survive a suspend (``Criu.tcp_repair``) and
memory can be restored lazily (``Criu.lazy``, where the kernel has userfaultfd and
``/dev/userfaultfd``). A stock CRIU >= 4.2 works without any: through runc, with
connections closed at a pause.

``ensure_kdat_dir`` mounts the tmpfs where the patched build keeps its cache of kernel
probes: CRIU only caches on a tmpfs (the cache must not outlive a reboot), /run is not one
on every host, and probing again costs ~50 ms on every dump and restore.

The legacy path (images taken by ``runc checkpoint``) still goes through runc, which
starts CRIU with a configuration file of its own (``write_runc_restore_config``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bac_server.host import is_mount_point
from bac_server.host._syscalls import MS_NODEV, MS_NOEXEC, MS_NOSUID, mount

_log = logging.getLogger(__name__)
_MIN_VERSION = (4, 2)
_CANDIDATES = ("/usr/local/sbin/criu",)
# Must match RUNDIR of the build (scripts/build-criu.sh).
KDAT_DIR = Path("/run/bac-criu")
_PATCHED_FEATURE = "tcp_close_external"
_UFFD_DEVICE = Path("/dev/userfaultfd")


@dataclass(frozen=True)
class Criu:
    binary: str
    version: tuple[int, int, int]
    # Bac's patches: CRIU run directly, with cgroups ignored (see _criu_cgroups).
    direct: bool = False
    # Established TCP connections survive a suspend.
    tcp_repair: bool = False
    # Memory can be restored after the processes run (userfaultfd).
    lazy: bool = False


def _version(text: str) -> tuple[int, int, int] | None:
    found = re.search(r"Version:\s*(\d+)\.(\d+)(?:\.(\d+))?", text)
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2)), int(found.group(3) or 0)


def _run(*argv: str) -> tuple[int, str]:
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False,
                          timeout=60)
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


def find_criu(explicit: str | None = None) -> Criu | None:
    """The first CRIU that is recent enough and passes ``criu check``; None if there is none
    (the reason is logged). Blocking (a few short processes)."""
    names = [explicit] if explicit else [*_CANDIDATES, shutil.which("criu") or ""]
    reasons = []
    for name in filter(None, names):
        if not os.access(name, os.X_OK):
            continue
        code, out = _run(name, "--version")
        version = _version(out) if code == 0 else None
        if version is None or version[:2] < _MIN_VERSION:
            reasons.append(f"{name}: version {version} < {_MIN_VERSION}")
            continue
        code, out = _run(name, "check")
        if code != 0:
            reasons.append(f"{name}: 'criu check' failed: {out.strip()[-300:]}")
            continue
        patched = _run(name, "check", "--feature", _PATCHED_FEATURE)[0] == 0
        if not patched:
            _log.warning("%s lacks Bac's patches (scripts/build-criu.sh): pause and resume "
                         "go through runc, and established TCP connections close", name)
            return Criu(name, version)
        lazy = _UFFD_DEVICE.exists() and _run(name, "check", "--feature", "uffd-noncoop")[0] == 0
        return Criu(name, version, direct=True, tcp_repair=True, lazy=lazy)
    _log.warning("no usable CRIU (scripts/build-criu.sh installs one); sandboxes can be "
                 "paused without their memory only. %s", "; ".join(reasons) or "none found")
    return None


def ensure_kdat_dir() -> None:
    """Mount CRIU's cache directory once per host boot (idempotent, blocking)."""
    if is_mount_point(KDAT_DIR):
        return
    KDAT_DIR.mkdir(mode=0o700, exist_ok=True)
    # SECURITY: a root-only tmpfs: the cache steers how CRIU (running as root) treats the
    # kernel, so nobody else may write it; it ends with the boot it describes.
    mount("tmpfs", str(KDAT_DIR), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
          "size=1m,mode=0700")


def stdio_keys(pid: int) -> dict[int, str]:
    """CRIU's external-file keys for fds 0-2 of ``pid`` (host files the sandbox cannot
    name), by fd number. Pipes are left to CRIU, which saves and makes them itself."""
    keys: dict[int, str] = {}
    for fd in (0, 1, 2):
        try:
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
            target = os.stat(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if stat.S_ISFIFO(target.st_mode):
            continue
        inode = target.st_ino
        found = re.search(r"^mnt_id:\s*(\d+)", info, re.MULTILINE)
        if found is not None:
            keys[fd] = f"file[{int(found.group(1)):x}:{inode:x}]"
    return keys


def inherit_fds(keys: dict[int, str]) -> list[str]:
    """``inherit-fd`` values handing CRIU's own fds 0-2 to the restored tasks, one per
    distinct file (fds 1 and 2 usually share one)."""
    seen: set[str] = set()
    values = []
    for fd, key in sorted(keys.items()):
        if key not in seen:
            seen.add(key)
            values.append(f"fd[{fd}]:{key}")
    return values


def write_runc_restore_config(path: Path, keys: dict[int, str]) -> None:
    """The configuration of a legacy restore through runc (``CRIU_CONFIG_FILE``)."""
    lines = [f"inherit-fd {value}" for value in inherit_fds(keys)] + ["tcp-close"]
    path.write_text("".join(line + "\n" for line in lines))


def choose_runtime(wanted: str) -> str:
    """``"auto"``: runc when a usable CRIU is installed (sandboxes can then be saved with
    their memory), crun otherwise (it starts sandboxes faster). Anything else is kept."""
    if wanted != "auto":
        return wanted
    return "runc" if shutil.which("runc") and find_criu() is not None else "crun"
