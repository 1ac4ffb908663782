"""Remove a directory tree that may still have something mounted inside it.

``shutil.rmtree`` does not stop at mount points: run over a stale bind of ``/dev`` or a
proc mount it would delete through it. Everything mounted below the tree is detached
first, and removal is refused if anything is still mounted there.

The mount table is the authority (a bind of the same file system has the same device),
and reading it costs the kernel a line per mount on the host: with hundreds of sandboxes,
each read is thousands of lines. So several trees are cleared together (``remove_trees``)
with two reads in all, one to find what to detach and one to check that nothing is left.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from ._errors import HostChangeFailed
from ._mounts import mount_table, mounts_under
from ._syscalls import MNT_DETACH, UMOUNT_NOFOLLOW, umount


def _mounts_below(paths: Sequence[Path]) -> list[str]:
    """Mount points at or below each of ``paths`` (parents before their children), from
    one read of the table."""
    table = mount_table(containing=os.path.commonpath([str(p) for p in paths]))
    return [point for path in paths for point in mounts_under(path, table)]


def unmount_trees(paths: Sequence[Path]) -> None:
    """Detach every mount at or below each of ``paths`` (deepest first)."""
    if not paths:
        return
    for point in reversed(_mounts_below(paths)):
        try:
            # SECURITY: only mounts below a directory Bac owns are detached.
            umount(point, MNT_DETACH | UMOUNT_NOFOLLOW)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOENT):
                raise HostChangeFailed(f"could not unmount {point}: {exc}") from exc
    left = _mounts_below(paths)
    if left:
        raise HostChangeFailed(f"still mounted below {', '.join(map(str, paths))}: {left}")


def unmount_tree(path: Path) -> None:
    """Detach every mount at or below ``path`` (deepest first)."""
    unmount_trees([path])


def remove_trees(paths: Sequence[Path]) -> None:
    """Unmount everything below each of ``paths``, then delete them. Missing paths are
    fine."""
    present = [p for p in paths if p.exists() or p.is_symlink()]
    unmount_trees(present)
    for path in present:
        shutil.rmtree(path, ignore_errors=False)


def remove_tree(path: Path) -> None:
    """Unmount everything below ``path``, then delete it. Missing paths are fine."""
    remove_trees([path])
