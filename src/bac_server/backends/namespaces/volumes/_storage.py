"""Volumes on the host: each one an ext4 file system of a bounded size in a sparse image.

Layout, under ``<data>/volumes/`` (0710 root:<sandbox root gid>, like ``sandboxes/``:
CRIU binds a volume back into a restored sandbox as the sandbox's root)::

    <id>/             0710 root:<sandbox root gid>
      disk.img        0600 root   the file system, sparse: the host pays for what is written
      mnt/            its mount point (nodev, nosuid, private), the file system's top
        data/         0755, the sandbox's uid 1000 (its default user): the volume's content

``data/`` is what sandboxes mount and what the content API serves: the file system's top
(``lost+found``) stays out of reach. The size is enforced by the file system, as a slot's
disk is (``slots._disk``): a write past it fails with ``ENOSPC``, inside a sandbox and
through the API alike; inodes are bounded with it. The loop device detaches itself with
the mount (``host._loop``), so unmounting is the whole teardown. A volume stays mounted
on the host while it exists (any number of sandboxes bind it, the API reads it); after a
reboot the first use mounts it again.

The inside is never trusted: the host mounts the image nodev and nosuid, and touches its
content only through the confined calls of the control plane's content API
(``control.volumes._content``), never by following a path a sandbox could have changed.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

from bac_server.host import IdRange, is_mount_point
from bac_server.host._syscalls import MNT_DETACH, MS_PRIVATE, mount, umount

from ..slots import mount_image

_MIB = 1024 * 1024
MIN_SIZE_MB = 16
# One inode per 16 KiB, ext4's default ratio (as a slot's disk).
_BYTES_PER_INODE = 16384
_MKFS_TIMEOUT_S = 60.0
# The volume's content belongs to the template's default user (uid and gid 1000 inside).
CONTENT_UID = 1000


class VolumeStorage:
    """The volumes of one data directory. Every method blocks: run them off the loop."""

    def __init__(self, data_dir: Path, ids: IdRange) -> None:
        self.root = data_dir / "volumes"
        self._ids = ids

    def _dir(self, volume_id: str) -> Path:
        if not volume_id.isalnum() or not volume_id.isascii():
            raise OSError(errno.EINVAL, f"bad volume id {volume_id!r}")
        return self.root / volume_id

    def content(self, volume_id: str) -> Path:
        return self._dir(volume_id) / "mnt" / "data"

    def make(self, volume_id: str, size_mb: int) -> None:
        """Format and mount the volume's file system (idempotent)."""
        if size_mb < MIN_SIZE_MB:
            raise OSError(errno.EINVAL, f"a volume is at least {MIN_SIZE_MB} MiB")
        self.root.mkdir(mode=0o710, exist_ok=True)
        os.chown(self.root, 0, self._ids.root)
        os.chmod(self.root, 0o710)  # noqa: S103 - the sandboxes' root group traverses
        top = self._dir(volume_id)
        top.mkdir(mode=0o710, exist_ok=True)
        os.chown(top, 0, self._ids.root)
        image = top / "disk.img"
        if not image.exists():
            self._format(image, size_mb)
        self.ensure_mounted(volume_id)

    def _format(self, image: Path, size_mb: int) -> None:
        mkfs = shutil.which("mkfs.ext4")
        if mkfs is None:
            raise OSError(errno.ENOENT, "mkfs.ext4 is missing (apt-get install e2fsprogs)")
        tmp = image.with_name(".disk.img.partial")
        tmp.unlink(missing_ok=True)
        with open(tmp, "xb") as out:
            out.truncate(size_mb * _MIB)
        os.chmod(tmp, 0o600)
        made = subprocess.run(
            [mkfs, "-q", "-F", "-T", "default", "-b", "4096", "-I", "256",
             "-i", str(_BYTES_PER_INODE), "-m", "0", "-L", "bac-volume",
             "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0",
             str(tmp)],
            capture_output=True, text=True, timeout=_MKFS_TIMEOUT_S, check=False)
        if made.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise OSError(errno.EIO, f"mkfs.ext4 failed: {made.stderr.strip()[-300:]}")
        os.replace(tmp, image)

    def ensure_mounted(self, volume_id: str) -> Path:
        """Mount the volume when it is not (made, or after a reboot); its content dir."""
        top = self._dir(volume_id)
        image = top / "disk.img"
        target = top / "mnt"
        if not image.exists():
            raise OSError(errno.ENOENT, f"volume {volume_id} has no file system", str(image))
        target.mkdir(mode=0o710, exist_ok=True)
        if not is_mount_point(target):
            # SECURITY: no device nodes or setuid honoured through it, anywhere it is
            # bound; private, so nothing mounted under one of its binds propagates back.
            mount_image(image, target)
            mount("none", str(target), None, MS_PRIVATE, None)
            os.chown(target, 0, self._ids.root)
            os.chmod(target, 0o710)  # noqa: S103 - the sandboxes' root group traverses
        content = target / "data"
        if not os.path.lexists(content):
            content.mkdir(mode=0o755)
            owner = self._ids.root + CONTENT_UID
            os.chown(content, owner, owner)
            os.chmod(content, 0o755)  # noqa: S103 - the volume's top, as a home dir
        return content

    def drop(self, volume_id: str) -> None:
        """Unmount (lazily while a sandbox still binds it) and delete. Idempotent."""
        top = self._dir(volume_id)
        target = top / "mnt"
        if is_mount_point(target):
            try:
                umount(str(target))
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
                umount(str(target), MNT_DETACH)
        if is_mount_point(target):
            raise OSError(errno.EBUSY, f"volume {volume_id} is still mounted", str(target))
        if top.exists():
            shutil.rmtree(top)
