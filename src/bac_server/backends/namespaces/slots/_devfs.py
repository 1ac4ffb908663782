"""A sandbox's /dev across a dump and restore without ``tar``.

/dev is a small tmpfs that runc fills at start: directories and empty files that other
mounts cover (pts, shm, mqueue, the device nodes bound from the host) and a few
symbolic links. CRIU saves any tmpfs by running ``tar`` and ``gzip`` and restores it
with them again: two processes each way, 10-50 ms on the 2-vCPU reference host, the
largest single cost of a restore. When /dev holds nothing else, its entries are noted in
the dump's metadata instead (``scan``) and /dev is declared external; the restore gets a
fresh tmpfs made on the host with the same entries, owner and size (``prepare``), which
CRIU binds in as the sandbox's /dev (still a tmpfs of its own), and the host lets go of
it once the sandbox holds it (``release``: in a thread, since a detach may wait for an RCU
grace period and the restored sandbox need not). Anything else in /dev (a file with data,
a device node, a socket) leaves it to CRIU and ``tar``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path
from typing import Any

from bac_server.host._syscalls import MNT_DETACH, MS_NODEV, MS_NOEXEC, MS_NOSUID, mount, umount

from ._record import SlotPaths

_MS_STRICTATIME = 1 << 24
# Host mounts being detached in the background, by path: the next ``prepare`` of the
# same slot waits for its own.
_detaching: dict[str, threading.Thread] = {}
_detaching_lock = threading.Lock()
# Mount flags of the config's /dev options. They must be those of the mount CRIU saved:
# made outside the sandbox's user namespace, the bind's flags are locked inside it and
# CRIU, restoring them from there, may not change them.
_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
          "strictatime": _MS_STRICTATIME}


def _dev_options(config: dict[str, Any]) -> tuple[str, int]:
    size, flags = "65536k", 0
    for entry in config["mounts"]:
        if entry["destination"] == "/dev":
            for option in entry.get("options", []):
                if option.startswith("size="):
                    size = option[len("size="):]
                flags |= _FLAGS.get(option, 0)
    return size, flags


def scan(pid: int, config: dict[str, Any]) -> dict[str, Any] | None:
    """/dev of a live sandbox as data, or None if it holds anything but mount points,
    empty files and directories, and symbolic links."""
    root = Path(f"/proc/{pid}/root/dev")
    try:
        top = root.lstat()
        entries = []
        with os.scandir(root) as listing:
            for item in listing:
                info = item.stat(follow_symlinks=False)
                if info.st_dev != top.st_dev:  # another mount covers it
                    kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
                    entries.append({"name": item.name, "kind": kind, "mode": 0o755 if
                                    kind == "dir" else 0o644, "uid": top.st_uid,
                                    "gid": top.st_gid})
                    continue
                if stat.S_ISLNK(info.st_mode):
                    kind, target = "link", os.readlink(item.path)
                elif stat.S_ISDIR(info.st_mode) and not any(os.scandir(item.path)):
                    kind, target = "dir", ""
                elif stat.S_ISREG(info.st_mode) and info.st_size == 0:
                    kind, target = "file", ""
                else:
                    return None
                entries.append({"name": item.name, "kind": kind, "target": target,
                                "mode": stat.S_IMODE(info.st_mode), "uid": info.st_uid,
                                "gid": info.st_gid})
    except OSError:
        return None
    size, flags = _dev_options(config)
    return {"mode": stat.S_IMODE(top.st_mode), "uid": top.st_uid, "gid": top.st_gid,
            "size": size, "flags": flags, "entries": entries}


def host_dir(paths: SlotPaths) -> Path:
    return paths.root / "devfs"


def prepare(paths: SlotPaths, dev: dict[str, Any]) -> Path:
    """A fresh tmpfs with ``dev``'s entries, to be bound in as the sandbox's /dev."""
    target = host_dir(paths)
    _release_now(target)
    target.mkdir(mode=0o700, exist_ok=True)
    options = f"size={dev['size']},mode={dev['mode']:o},uid={dev['uid']},gid={dev['gid']}"
    # SECURITY: a tmpfs owned by the sandbox's root, under the slot's own directory; it
    # holds only the entries runc made, read from the sandbox when it was saved.
    mount("tmpfs", str(target), "tmpfs", int(dev["flags"]), options)
    try:
        for entry in dev["entries"]:
            path = target / entry["name"]
            if entry["kind"] == "link":
                os.symlink(entry["target"], path)
            elif entry["kind"] == "dir":
                path.mkdir(mode=entry["mode"])
            else:
                path.touch(mode=entry["mode"])
            os.lchown(path, entry["uid"], entry["gid"])
            if entry["kind"] != "link":
                path.chmod(entry["mode"])
    except BaseException:
        _release_now(target)
        raise
    return target


def release(paths: SlotPaths) -> None:
    """Detach the host's mount of it (the sandbox's bind keeps it alive), in a thread;
    returns at once. The empty directory stays for the next ``prepare`` or the teardown
    (``release_now``, which waits for this detach first)."""
    target = host_dir(paths)
    worker = threading.Thread(target=_detach, args=(target,), name="bac-devfs-release",
                              daemon=True)
    with _detaching_lock:
        _detaching[str(target)] = worker
        worker.start()


def _detach(target: Path) -> None:
    try:
        with contextlib.suppress(OSError):
            umount(str(target), MNT_DETACH)
    finally:
        with _detaching_lock:
            if _detaching.get(str(target)) is threading.current_thread():
                del _detaching[str(target)]


def release_now(paths: SlotPaths) -> None:
    """Detach and remove it before returning (a teardown), after any detach under way."""
    _release_now(host_dir(paths))


def _release_now(target: Path) -> None:
    with _detaching_lock:
        pending = _detaching.get(str(target))
    if pending is not None:
        pending.join()
    with contextlib.suppress(OSError):
        umount(str(target), MNT_DETACH)
    with contextlib.suppress(OSError):
        target.rmdir()
