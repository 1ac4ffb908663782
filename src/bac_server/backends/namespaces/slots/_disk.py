"""A slot's own disk: the overlay's upper layer on an ext4 file system of the sandbox's size.

``disk_mb`` is enforced by the size of a file system, not by accounting on a shared one:
each slot's ``layer/`` (the overlay's upper and work directories) is an ext4 file system
in a sparse image ``<slot>/disk.img``, mounted through a loop device that detaches itself
with the mount (``host._loop``). So a write past the size fails inside with ``ENOSPC``
("No space left on device"), the inodes are bounded with it (one per
``BYTES_PER_INODE``), the host loses at most the image's size, ``df /`` inside shows the
sandbox's own size (overlayfs reports its upper file system), and usage is one
``statvfs`` of the file system's own counters, however many files it holds. The choice
against project quotas, a shared btrfs and tmpfs, and the costs measured, are in
docs/security.md (*Disk*).

Formatting is paid once per size: the first slot of a size runs ``mkfs.ext4`` into a
prototype image under ``<data>/cache/slot-disks/`` (lazy inode tables and journal, so
about 240 KiB of it is written), and every slot copies its written extents (holes stay
holes; under 1 ms). The copies share the prototype's UUID, which ext4 does not mind;
overlayfs uses the upper's UUID only with index or NFS export, both off here.

The inside is never trusted: the host only mounts the image (nodev, nosuid), makes the
upper and work directories at its top, reads its counters and unmounts it; the files the
sandbox wrote are reached by the host only through the overlay, as before.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bac_server.host import IdRange, is_mount_point
from bac_server.host._loop import loop_device
from bac_server.host._syscalls import (
    MNT_DETACH,
    MS_NODEV,
    MS_NOSUID,
    UMOUNT_NOFOLLOW,
    mount,
    umount,
)

from ._record import SlotPaths

# One inode per 16 KiB of disk (ext4's default ratio): 655,360 at the default 10 GiB,
# 4,096 at 64 MiB; the inode tables are not written until used (holes in the image).
BYTES_PER_INODE = 16384
MIN_DISK_MB = 32
_MIB = 1024 * 1024
# Part of the prototype's name: a change of the mkfs options below makes new ones.
_FORMAT = 1
_MOUNT_OPTIONS = "noinit_itable,discard,errors=remount-ro"
_MKFS_TIMEOUT_S = 60.0
# Below this much free space (or 1 % of the disk, whichever is less) the disk is full:
# ext4 keeps a few blocks back for its own metadata, so a filled one never reaches 0.
_FULL_MARGIN_BYTES = 4 * _MIB


class DiskError(OSError):
    """The slot's disk could not be made or mounted."""


@dataclass(frozen=True)
class DiskUsage:
    """A slot disk's own counters (``statvfs``): bytes and inodes."""

    used_bytes: int
    total_bytes: int
    free_bytes: int  # what the sandbox may still write
    inodes_used: int
    inodes_total: int

    @property
    def full(self) -> bool:
        """No room for another file's data, or no inode left for another file."""
        margin = min(_FULL_MARGIN_BYTES, self.total_bytes // 100)
        return self.free_bytes <= margin or \
            (self.inodes_total > 0 and self.inodes_used >= self.inodes_total)


def inodes_for(disk_mb: int) -> int:
    return disk_mb * _MIB // BYTES_PER_INODE


def prototypes_dir(data_dir: Path) -> Path:
    return data_dir / "cache" / "slot-disks"


def _journal_mb(disk_mb: int) -> int:
    # ext4's smallest journal is 1024 blocks (4 MiB); 16 MiB is plenty for a scratch disk.
    return 16 if disk_mb >= 256 else 4


def _prototype(directory: Path, disk_mb: int) -> Path:
    """The formatted empty image of ``disk_mb`` (made once, published by rename)."""
    path = directory / f"ext4-{disk_mb}m-{BYTES_PER_INODE}-v{_FORMAT}.img"
    if path.exists():
        return path
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    mkfs = shutil.which("mkfs.ext4")
    if mkfs is None:
        raise DiskError(errno.ENOENT, "mkfs.ext4 is missing (apt-get install e2fsprogs)")
    lock_fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if path.exists():  # made while this one waited
            return path
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        with open(tmp, "xb") as image:
            image.truncate(disk_mb * _MIB)
        os.chmod(tmp, 0o600)
        made = subprocess.run(
            [mkfs, "-q", "-F", "-T", "default", "-b", "4096", "-I", "256",
             "-i", str(BYTES_PER_INODE), "-m", "0", "-O", "^resize_inode",
             "-J", f"size={_journal_mb(disk_mb)}", "-L", "bac-slot",
             "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0",
             str(tmp)],
            capture_output=True, text=True, timeout=_MKFS_TIMEOUT_S, check=False)
        if made.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise DiskError(errno.EIO, f"mkfs.ext4 failed: {made.stderr.strip()}")
        os.replace(tmp, path)
        return path
    finally:
        os.close(lock_fd)


def _copy_sparse(source: Path, target: Path) -> None:
    """Copy ``source``'s written extents into a new 0600 ``target``; holes stay holes."""
    src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                      | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(src).st_size
            os.ftruncate(dst, size)
            offset = 0
            while offset < size:
                try:
                    data = os.lseek(src, offset, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # only a hole is left
                        break
                    raise
                hole = os.lseek(src, data, os.SEEK_HOLE)
                while data < hole:
                    copied = os.copy_file_range(src, dst, hole - data, data, data)
                    if copied == 0:
                        raise DiskError(errno.EIO, f"{source} shrank while copied")
                    data += copied
                offset = hole
        finally:
            os.close(dst)
    finally:
        os.close(src)


def make_disk(paths: SlotPaths, data_dir: Path, disk_mb: int, ids: IdRange, *,
              seeded: Path | None = None) -> None:
    """The slot's disk of ``disk_mb``, mounted at ``paths.layer``, with the overlay's upper
    (the sandbox's "/": sandbox root's) and work directories in it. ``seeded``: an image
    of ``disk_mb`` that already holds them, files and all (``SeedImage``), copied instead
    of the empty one. Blocking."""
    if disk_mb < MIN_DISK_MB:
        raise DiskError(errno.EINVAL, f"a sandbox's disk is at least {MIN_DISK_MB} MiB, "
                                      f"not {disk_mb}")
    _copy_sparse(seeded or _prototype(prototypes_dir(data_dir), disk_mb), paths.disk)
    mount_disk(paths)
    os.chmod(paths.layer, 0o700)
    if seeded is None:
        _make_layer_dirs(paths.layer, ids)


def _make_layer_dirs(top: Path, ids: IdRange) -> None:
    (top / "upper").mkdir(mode=0o755)
    os.chown(top / "upper", ids.root, ids.root)
    os.chmod(top / "upper", 0o755)  # noqa: S103 - the sandbox's "/", as in any image
    (top / "work").mkdir(mode=0o700)


class SeedImage:
    """A disk image of one size being filled once, for many slots to copy (``seeded``).

    ``open`` copies the empty prototype to a temporary file next to ``target`` and mounts
    it (upper and work directories made, as in a slot's disk); the caller fills
    ``upper``; ``publish`` unmounts it, syncs it and renames it to ``target``, so a
    ``target`` that exists is whole. ``discard`` undoes whatever is left (idempotent).
    The temporary file and mount point are named after ``target``: ``open`` removes what
    a crash mid-fill left of them. Callers serialise the fills of one ``target``.
    Blocking, all of it."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self._tmp = target.with_name(f".{target.name}.filling")
        self._mnt = target.with_name(f".{target.name}.mnt")

    @property
    def upper(self) -> Path:
        return self._mnt / "upper"

    def open(self, data_dir: Path, disk_mb: int, ids: IdRange) -> None:
        self.discard()
        _copy_sparse(_prototype(prototypes_dir(data_dir), disk_mb), self._tmp)
        self._mnt.mkdir(mode=0o700)
        mount_image(self._tmp, self._mnt)
        os.chmod(self._mnt, 0o700)
        _make_layer_dirs(self._mnt, ids)

    def publish(self) -> None:
        umount(str(self._mnt))  # not lazily: the image must be whole before it is named
        self._mnt.rmdir()
        fd = os.open(self._tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self._tmp, self.target)

    def discard(self) -> None:
        if self._mnt.exists():
            unmount(self._mnt)
            self._mnt.rmdir()
        self._tmp.unlink(missing_ok=True)


def has_disk(paths: SlotPaths) -> bool:
    """Whether the slot was made with a disk of its own (slots of older servers were not)."""
    return paths.disk.exists()


def mount_disk(paths: SlotPaths) -> None:
    """Mount the slot's image at ``paths.layer`` (made, or again after a reboot)."""
    paths.layer.mkdir(mode=0o700, exist_ok=True)
    # The sandbox's own file system, mounted where only root can reach (the slot's 0700
    # layer/).
    mount_image(paths.disk, paths.layer)


def mount_image(image: Path, target: Path) -> None:
    """Mount the ext4 file system in ``image`` at ``target`` through a loop device that
    detaches itself with the mount. SECURITY: a file system a sandbox writes: no device
    nodes or setuid honoured through it."""
    fd = os.open(image, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with loop_device(fd, str(image)) as device:
            mount(device, str(target), "ext4", MS_NODEV | MS_NOSUID, _MOUNT_OPTIONS)
    finally:
        os.close(fd)


def unmount_disk(paths: SlotPaths) -> None:
    """Unmount the slot's disk if mounted (its loop device detaches with it); detach
    lazily if something still holds it. Idempotent."""
    unmount(paths.layer)


def unmount(target: Path) -> None:
    """Unmount one of the slot's mounts (its disk, its root) if mounted; detach lazily if
    something still holds it. Idempotent: the kernel's EINVAL says nothing is mounted
    there (cheaper than reading the host's mount table first)."""
    try:
        # SECURITY: only the slot's own mounts, under the slot's directory.
        umount(str(target))
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            umount(str(target), MNT_DETACH | UMOUNT_NOFOLLOW)
        elif exc.errno not in (errno.EINVAL, errno.ENOENT):
            raise


def disk_usage(paths: SlotPaths) -> DiskUsage | None:
    """The disk's counters, or None for a slot without a disk of its own (mounted)."""
    if not has_disk(paths) or not is_mount_point(paths.layer):
        return None
    try:
        st = os.statvfs(paths.layer)
    except FileNotFoundError:
        return None
    return DiskUsage(
        used_bytes=(st.f_blocks - st.f_bfree) * st.f_frsize,
        total_bytes=st.f_blocks * st.f_frsize, free_bytes=st.f_bavail * st.f_frsize,
        inodes_used=st.f_files - st.f_ffree, inodes_total=st.f_files)
