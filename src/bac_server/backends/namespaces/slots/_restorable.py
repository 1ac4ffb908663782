"""What a slot needs so that CRIU can save it and runc can bring it back (runc slots only).

Three things differ from a slot that is only ever started and destroyed:

* **The network namespace is pinned** by a bind mount at ``<slot>/netns``. runc records the
  namespace's path and looks at it again at checkpoint and restore; the path must outlive
  the server process that made it, and the namespace (with its veth and address) must
  outlive the sandbox's processes while they exist only as images on disk. CRIU itself runs
  *inside* that namespace (``nsenter``): it then treats the namespace as its own and leaves
  it alone, which is what lets a namespace owned by the host (see docs/security.md) sit
  under a sandbox with its own user namespace — CRIU refuses to dump a namespace its
  target's user namespace does not own.
* **/sys is a flat copy** (``/run/bac-sys``: host sysfs bound without the mounts below it,
  read-only). runc binds /sys recursively; the mounts below it (cgroup, debugfs, ...) are
  locked in the sandbox's user namespace, so a restore cannot bind /sys again one mount at
  a time (``open_tree: Invalid argument``). The copy shows what crun's non-recursive bind
  shows.
* **No masks over empty directories.** In the flat copy, the masked mount points
  (``/sys/fs/cgroup``, ``/sys/kernel/debug``, ...) are empty directories: nothing to hide.
  Each mask is a tmpfs, and CRIU saves and restores every tmpfs with a ``tar`` process
  (~20 ms each way), so only masks over real content are kept.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bac_server.host import is_mount_point, remove_trees
from bac_server.host._syscalls import (
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    mount,
    umount,
)

from ..network import tcp_hold
from ._devfs import release_now as release_devfs
from ._record import SlotPaths
from ._runtime import OciRuntime

FLAT_SYSFS = Path("/run/bac-sys")
# In a slot directory while a suspend holds CRIU's own network lock in its namespace (when
# the host-side hold could not be taken, or images of an older Bac; see checkpoint.criu._dump).
LOCK_MARKER = "tcp-locked"
_MS_REMOUNT = 0x20  # changing a bind mount's flags takes a remount


def netns_pin(paths: SlotPaths) -> Path:
    return paths.root / "netns"


def pin_netns(paths: SlotPaths, netns_fd: int) -> str:
    """Bind the namespace held by ``netns_fd`` at ``<slot>/netns``; returns that path."""
    target = netns_pin(paths)
    target.touch(mode=0o600, exist_ok=True)
    # SECURITY: binds a namespace this server made onto a file in the slot's own directory
    # (0710, unreachable from any sandbox).
    mount(f"/proc/self/fd/{netns_fd}", str(target), None, MS_BIND, None)
    return str(target)


def netns_pinned(paths: SlotPaths) -> bool:
    return is_mount_point(netns_pin(paths))


def unpin_netns(paths: SlotPaths) -> None:
    """Release the pinned namespace (it ends once no process is left in it). Idempotent."""
    target = netns_pin(paths)
    for _ in range(8):  # a file may carry stacked binds after a crash mid-pin
        try:
            umount(str(target), MNT_DETACH)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                break
            raise
    with contextlib.suppress(FileNotFoundError):
        target.unlink()


def ensure_flat_sysfs() -> None:
    """Mount the flat read-only sysfs copy once per host boot (idempotent)."""
    if is_mount_point(FLAT_SYSFS):
        return
    FLAT_SYSFS.mkdir(mode=0o755, exist_ok=True)
    # Sandbox root (an unprivileged host uid) must traverse it.
    os.chmod(FLAT_SYSFS, 0o755)  # noqa: S103
    # SECURITY: without MS_REC no mount below /sys (cgroupfs, debugfs, securityfs, bpffs,
    # tracefs, pstore) comes along; read-only, no devices, no setuid, no exec.
    mount("/sys", str(FLAT_SYSFS), None, MS_BIND, None)
    mount("none", str(FLAT_SYSFS), None,
          _MS_REMOUNT | MS_BIND | MS_NOEXEC | MS_NOSUID | MS_NODEV | MS_RDONLY, None)


def _empty_dir(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except (NotADirectoryError, FileNotFoundError):
        return False


def adapt_config(config: dict[str, Any]) -> None:
    """Make a runc ``config.json`` restorable: flat /sys, no masks over empty directories."""
    for entry in config["mounts"]:
        if entry["destination"] == "/sys":
            entry["source"] = str(FLAT_SYSFS)
    linux = config["linux"]
    linux["maskedPaths"] = [
        p for p in linux["maskedPaths"]
        if not (p.startswith("/sys/") and _empty_dir(FLAT_SYSFS / p[len("/sys/"):]))
    ]


def restorable(runtime: OciRuntime) -> bool:
    """Slots of this runtime are laid out for checkpoints (runc drives CRIU; crun as
    packaged by Debian has no CRIU support)."""
    return runtime.name == "runc"


def remove_slot_state(paths: SlotPaths, trees: Sequence[Path] = ()) -> None:
    """What checkpointing adds to a slot directory (for teardown), and the slot's other
    ``trees``, removed with it in one pass (the host's mount table read once to detach
    and once to check, not per tree). The host-side hold goes first: the sandbox's
    address is leased to another one next."""
    tcp_hold.release(paths.root)
    unpin_netns(paths)
    release_devfs(paths)
    remove_trees([*trees, paths.root / "suspend", paths.root / "criu-work"])
    (paths.root / LOCK_MARKER).unlink(missing_ok=True)
