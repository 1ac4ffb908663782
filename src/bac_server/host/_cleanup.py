"""Remove a directory tree that may still have something mounted inside it.

``shutil.rmtree`` does not stop at mount points: run over a stale bind of ``/dev`` or a
proc mount it would delete through it. Everything mounted below the tree is detached
first, and removal is refused if anything is still mounted there.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from ._errors import HostChangeFailed
from ._mounts import mounts_under
from ._syscalls import MNT_DETACH, UMOUNT_NOFOLLOW, umount


def unmount_tree(path: Path) -> None:
    """Detach every mount at or below ``path`` (deepest first)."""
    for point in reversed(mounts_under(path)):
        try:
            # SECURITY: only mounts below a directory Bac owns are detached.
            umount(point, MNT_DETACH | UMOUNT_NOFOLLOW)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOENT):
                raise HostChangeFailed(f"could not unmount {point}: {exc}") from exc
    left = mounts_under(path)
    if left:
        raise HostChangeFailed(f"still mounted below {path}: {left}")


def remove_tree(path: Path) -> None:
    """Unmount everything below ``path``, then delete it. Missing paths are fine."""
    if not path.exists() and not path.is_symlink():
        return
    unmount_tree(path)
    shutil.rmtree(path, ignore_errors=False)
