"""A slot's files on the host: directories, the overlay root and the /etc files bound in.

Permissions follow one rule: the runtime, already inside the sandbox's user namespace,
must be able to traverse to what it mounts (group = the sandbox's root gid, mode 0710),
and no other host user may look inside (setuid binaries there run as the sandbox's ids).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from bac_server.host import IdRange, is_mount_point
from bac_server.host._syscalls import MNT_DETACH, MS_NODEV, mount, umount

from ._slot import SlotPaths


def _mkdir(path: Path, mode: int, uid: int, gid: int) -> None:
    path.mkdir(mode=mode, exist_ok=True)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def prepare_data_dirs(data_dir: Path, sandboxes: Path, ids: IdRange) -> None:
    """The shared parents: traversable by sandbox root, not listable by anyone else."""
    data_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
    os.chmod(data_dir, 0o711)  # noqa: S103 - traverse only; children decide access
    _mkdir(sandboxes, 0o710, 0, ids.root)


def make_slot_dirs(paths: SlotPaths, ids: IdRange) -> None:
    paths.root.mkdir(mode=0o710)  # fails if the slot exists: slot names are unique
    os.chown(paths.root, 0, ids.root)
    _mkdir(paths.layer, 0o700, 0, 0)
    # The upper directory's root becomes the sandbox's "/": owned by sandbox root.
    _mkdir(paths.layer / "upper", 0o755, ids.root, ids.root)
    _mkdir(paths.layer / "work", 0o700, 0, 0)
    _mkdir(paths.rootfs, 0o755, 0, 0)
    _mkdir(paths.etc, 0o710, 0, ids.root)


def write_identity(paths: SlotPaths, hostname: str, ids: IdRange) -> None:
    """(Re)write the files bound over /etc/hosts and /etc/hostname."""
    files = {
        "hosts": ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                  f"127.0.1.1\t{hostname}\n"),
        "hostname": f"{hostname}\n",
    }
    for name, text in files.items():
        target = paths.etc / name
        # Rewritten in place (a bind mount pins the inode); O_NOFOLLOW because the
        # sandbox can write this file, though it cannot replace it with a link.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)
        try:
            os.write(fd, text.encode())
            os.fchown(fd, ids.root, ids.root)
        finally:
            os.close(fd)


def mount_rootfs(paths: SlotPaths, lower: Path) -> None:
    for part in (str(lower), str(paths.layer)):
        if any(c in part for c in ",:"):
            raise ValueError(f"overlay paths may not contain ',' or ':': {part}")
    options = (f"lowerdir={lower},upperdir={paths.layer / 'upper'},"
               f"workdir={paths.layer / 'work'}")
    # SECURITY: the template stays read-only below; every write lands in this slot's
    # upper directory.
    mount("overlay", str(paths.rootfs), "overlay", MS_NODEV, options)


def unmount_rootfs(paths: SlotPaths) -> None:
    """Unmount the overlay if mounted; detach lazily if something still holds it."""
    if not is_mount_point(paths.rootfs):
        return
    try:
        umount(str(paths.rootfs))
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            umount(str(paths.rootfs), MNT_DETACH)
        elif exc.errno not in (errno.EINVAL, errno.ENOENT):
            raise


def disk_used(paths: SlotPaths) -> int:
    """Bytes written by the sandbox (its overlay upper layer)."""
    total = 0
    for dirpath, _dirs, files in os.walk(paths.layer / "upper"):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total
