"""Host kernel settings that thousands of sandboxes need. Values are only ever raised.

* ``kernel.pid_max``: each sandbox may hold up to its pids limit; the reference machine's
  32768 would let eight fork bombs starve the host.
* ``fs.inotify.max_user_instances`` / ``max_user_watches``: inotify use in every sandbox is
  charged to the host user that created its user namespace (root), host-wide.
* ``net.ipv4.neigh.default.gc_thresh*``: one neighbour entry per sandbox veth; the default
  table overflows at 1024.
* ``kernel.keys.maxkeys`` / ``maxbytes``: the runtime gives each sandbox a session keyring,
  charged to the one host uid its root maps to; the default quota (200 keys, 20000 bytes)
  refuses the ~200th sandbox ("unable to create session key: disk quota exceeded").
  Sandboxes cannot make keys themselves (seccomp refuses ``add_key`` and ``keyctl``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ._errors import HostChangeFailed

_log = logging.getLogger(__name__)

MINIMUMS: dict[str, int] = {
    "kernel.pid_max": 4_194_304,
    "fs.inotify.max_user_instances": 65_536,
    "fs.inotify.max_user_watches": 4_194_304,
    "net.ipv4.neigh.default.gc_thresh1": 4_096,
    "net.ipv4.neigh.default.gc_thresh2": 16_384,
    "net.ipv4.neigh.default.gc_thresh3": 32_768,
    "kernel.keys.maxkeys": 65_536,
    "kernel.keys.maxbytes": 4_194_304,
}


def _path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctl(name: str) -> int:
    return int(_path(name).read_text().split()[0])


def raise_sysctls(minimums: dict[str, int] | None = None) -> dict[str, int]:
    """Raise each setting to at least its minimum; returns the ones changed."""
    changed: dict[str, int] = {}
    for name, minimum in (MINIMUMS if minimums is None else minimums).items():
        path = _path(name)
        if not path.exists():
            _log.warning("sysctl %s does not exist on this kernel; skipped", name)
            continue
        current = read_sysctl(name)
        if current >= minimum:
            continue
        try:
            # SECURITY: raises a host-wide resource ceiling; never lowers one.
            path.write_text(f"{minimum}\n")
        except OSError as exc:
            raise HostChangeFailed(f"could not set {name}={minimum}: {exc}") from exc
        changed[name] = minimum
        _log.info("sysctl %s: %d -> %d", name, current, minimum)
    return changed
