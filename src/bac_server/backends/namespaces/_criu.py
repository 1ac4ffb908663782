"""CRIU, the tool that saves and restores process trees, as runc drives it.

``find_criu`` locates a CRIU recent enough for this kernel (``scripts/build-criu.sh``
installs one): 4.1 is needed on kernels >= 6.13 (vDSO layout) and 4.2 on kernels >= 6.16
(inet sockets refuse ``SO_PASSCRED``, which older versions query on every socket).

Every runc checkpoint or restore gets a CRIU configuration file of its own, passed in the
``CRIU_CONFIG_FILE`` environment variable (runc starts ``criu swrk`` with its environment).
It carries what runc's command line cannot say:

* envd's standard streams are host files (``/dev/null`` and the sandbox's log), outside
  the sandbox's mounts, so they are declared *external* at dump
  (``external file[<mnt_id>:<inode>]``) and handed back at restore as runc's own
  descriptors 0-2 (``inherit-fd fd[N]:<key>``);
* ``tcp-close``: established TCP connections are saved and restored closed. Restoring one
  open needs TCP repair mode, which needs ``CAP_NET_ADMIN`` over the network namespace;
  the sandbox's namespace belongs to the host's user namespace (docs/security.md), so the
  restored tasks, already in the sandbox's user namespace, get ``EPERM`` ("Can't turn TCP
  repair mode ON"). Listening sockets are restored (re-bound), connections are not; with
  ``tcp-close`` at dump CRIU also leaves no network lock rules behind.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_log = logging.getLogger(__name__)
_MIN_VERSION = (4, 2)
_CANDIDATES = ("/usr/local/sbin/criu",)


@dataclass(frozen=True)
class Criu:
    binary: str
    version: tuple[int, int, int]


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
        return Criu(name, version)
    _log.warning("no usable CRIU (scripts/build-criu.sh installs one); sandboxes can be "
                 "paused without their memory only. %s", "; ".join(reasons) or "none found")
    return None


def stdio_keys(pid: int) -> dict[int, str]:
    """CRIU's external-file keys for fds 0-2 of ``pid`` (host files the sandbox cannot
    name), by fd number."""
    keys: dict[int, str] = {}
    for fd in (0, 1, 2):
        try:
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
            inode = os.stat(f"/proc/{pid}/fd/{fd}").st_ino
        except FileNotFoundError:
            continue
        found = re.search(r"^mnt_id:\s*(\d+)", info, re.MULTILINE)
        if found is not None:
            keys[fd] = f"file[{int(found.group(1)):x}:{inode:x}]"
    return keys


def write_dump_config(path: Path, keys: dict[int, str]) -> None:
    lines = [f"external {key}" for key in sorted(set(keys.values()))] + ["tcp-close"]
    path.write_text("".join(line + "\n" for line in lines))


def write_restore_config(path: Path, keys: dict[int, str]) -> None:
    seen: set[str] = set()
    lines = []
    for fd, key in sorted(keys.items()):
        if key not in seen:
            seen.add(key)
            lines.append(f"inherit-fd fd[{fd}]:{key}")
    lines.append("tcp-close")
    path.write_text("".join(line + "\n" for line in lines))


def choose_runtime(wanted: str) -> str:
    """``"auto"``: runc when a usable CRIU is installed (sandboxes can then be saved with
    their memory), crun otherwise (it starts sandboxes faster). Anything else is kept."""
    if wanted != "auto":
        return wanted
    return "runc" if shutil.which("runc") and find_criu() is not None else "crun"
