"""A slot's files on the host: directories, the overlay root and the /etc files bound in.

``replace_upper`` swaps the sandbox's own files (the overlay's upper layer) for a copy of
a checkpoint's, for a roll-back or a copy.

Permissions follow one rule: the runtime, already inside the sandbox's user namespace,
must be able to traverse to what it mounts (group = the sandbox's root gid, mode 0710),
and no other host user may look inside (setuid binaries there run as the sandbox's ids).
What is the server's alone in there (records, OCI config, CRIU images) is closed to the
sandbox's root too: 0600 files (``host.write_private``), a 0700 images directory.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bac_server.cancel_safe import off_loop
from bac_server.host import IdRange, remove_tree, secure_data_dir

from .._config import NamespaceConfig
from ..layers import copy_tree, mount_overlay
from ._disk import make_disk, unmount
from ._record import SlotPaths

CA_FILE = "ca.pem"  # in the slot's /run/bac


@dataclass(frozen=True)
class SlotDisk:
    """The disk a new slot gets: its size, and the data dir whose prototypes it copies."""

    data_dir: Path
    disk_mb: int
    # An image of ``disk_mb`` already holding the slot's files (``SeedImage``), or None.
    seeded: Path | None = None


def _mkdir(path: Path, mode: int, uid: int, gid: int) -> None:
    path.mkdir(mode=mode, exist_ok=True)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


# What a slot or a checkpoint keeps that is the server's alone (the rest is the sandbox's
# files, or mounted into it): files 0600, the CRIU images' directory 0700.
_PRIVATE_FILES = ("state.json", "config.json", "network.json", "init.pid", "meta.json",
                  "relay-ca.sealed")
_IMAGE_DIRS = ("suspend/images", "images")


def prepare_data_dirs(config: NamespaceConfig) -> None:
    """The data dir private (``host.secure_data_dir``: it refuses what it cannot repair),
    the shared parents made (traversable by sandbox root, listable by nobody else), and
    what an older server or a crash mid-restore left open inside them closed again."""
    ids = config.id_range
    secure_data_dir(config.data_dir, ids)
    for shared in (config.sandboxes_dir, config.checkpoints_dir, config.bundles_dir):
        _mkdir(shared, 0o710, 0, ids.root)
    for parent in (config.sandboxes_dir, config.checkpoints_dir):
        for entry in os.scandir(parent):
            if entry.is_dir(follow_symlinks=False):
                _close_private(Path(entry.path))


def _close_private(directory: Path) -> None:
    for name in _PRIVATE_FILES:
        _tighten(directory / name, directory=False)
    for name in _IMAGE_DIRS:
        _tighten(directory / name, directory=True)


def _tighten(path: Path, *, directory: bool) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | (os.O_DIRECTORY if directory else os.O_NONBLOCK))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link where Bac writes none: never follow it
            return
        raise
    try:
        st = os.fstat(fd)
        wanted = 0o700 if directory else 0o600
        if st.st_uid == 0 and (stat.S_IMODE(st.st_mode) != wanted or st.st_gid != 0):
            # SECURITY: root's own file or directory, closed to the sandbox gid again.
            os.fchown(fd, 0, 0)
            os.fchmod(fd, wanted)
    finally:
        os.close(fd)


def make_slot_dirs(paths: SlotPaths, ids: IdRange, disk: SlotDisk, ca: bytes = b"") -> None:
    paths.root.mkdir(mode=0o710)  # fails if the slot exists: slot names are unique
    os.chown(paths.root, 0, ids.root)
    # The upper directory's root becomes the sandbox's "/": owned by sandbox root, on
    # the slot's own disk of its size (``_disk``).
    make_disk(paths, disk.data_dir, disk.disk_mb, ids, seeded=disk.seeded)
    _mkdir(paths.rootfs, 0o755, 0, 0)
    _mkdir(paths.etc, 0o710, 0, ids.root)
    make_trace_dir(paths, ids, ca)


def make_trace_dir(paths: SlotPaths, ids: IdRange, ca: bytes = b"") -> None:
    """The directory bound read-only at /run/bac: the trace socket (``_trace``) and the
    operator's CA certificates (``ca.pem``, when there are any, which envd adds to the
    sandbox's trust store: ``bac_envd._trust``). The sandbox's root may traverse it."""
    _mkdir(paths.trace, 0o710, 0, ids.root)
    if ca:
        write_ca(paths, ca)


def write_ca(paths: SlotPaths, ca: bytes) -> None:
    """The operator's CA certificates at /run/bac/ca.pem: root's, readable by all."""
    target = paths.trace / CA_FILE
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    try:
        os.write(fd, ca)
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)


def write_identity(paths: SlotPaths, hostname: str, ids: IdRange) -> None:
    """(Re)write the files bound over /etc/hosts and /etc/hostname."""
    files = {
        "hosts": ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                  f"127.0.1.1\t{hostname}\n"),
        "hostname": f"{hostname}\n",
    }
    for name, text in files.items():
        _write_etc(paths, name, text, ids)


def write_resolv_conf(paths: SlotPaths, host_address: str, ids: IdRange) -> None:
    """The file bound over /etc/resolv.conf: the resolver at the sandbox's gateway."""
    _write_etc(paths, "resolv.conf", f"nameserver {host_address}\noptions edns0 trust-ad\n",
               ids)


def _write_etc(paths: SlotPaths, name: str, text: str, ids: IdRange) -> None:
    # Rewritten in place (a bind mount pins the inode); O_NOFOLLOW because the sandbox
    # can write this file (root inside owns it), though it cannot replace it with a link.
    fd = os.open(paths.etc / name,
                 os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, text.encode())
        os.fchown(fd, ids.root, ids.root)
    finally:
        os.close(fd)


def mount_rootfs(paths: SlotPaths, layers: Sequence[Path]) -> None:
    """The slot's root: its template's layers (topmost first) under its own upper layer."""
    mount_overlay(paths.rootfs, layers, paths.layer / "upper", paths.layer / "work")


def unmount_rootfs(paths: SlotPaths) -> None:
    """Unmount the overlay if mounted; detach lazily if something still holds it."""
    unmount(paths.rootfs)


async def replace_upper(paths: SlotPaths, layers: Sequence[Path], source: Path) -> None:
    """Give the (stopped) slot the files of ``source``: overlay off, layer swapped, on
    (over ``layers``, the slot's stack). The slot's files go first: its disk is of the
    sandbox's size, with room for one copy of them, not two."""
    upper, work = paths.layer / "upper", paths.layer / "work"
    await off_loop(lambda: unmount_rootfs(paths))

    def empty() -> None:
        st = os.lstat(upper)
        remove_tree(upper)
        _mkdir(upper, 0o755, st.st_uid, st.st_gid)  # cp -a gives it the source's own
        # overlayfs keeps in-flight state in work/: a clean one for the new upper.
        remove_tree(work)
        work.mkdir(mode=0o700)

    await off_loop(empty)
    await copy_tree(source, upper)
    await off_loop(lambda: mount_rootfs(paths, layers))


def disk_used(tree: Path) -> int:
    """Bytes the files under ``tree`` take on disk (links not followed): a sandbox's upper
    layer, a checkpoint."""
    total = 0
    for dirpath, _dirs, files in os.walk(tree):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


def log_tail(path: Path, limit: int = 1500) -> str:
    """The last ``limit`` bytes of a log (envd's, the runtime's), decoded; "" for none."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode(errors="replace").strip()
    except OSError:
        return ""
