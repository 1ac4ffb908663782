"""Shift a rootfs's ownership once, so container uid N is host uid ``base + N``.

Sandboxes run in a user namespace mapping container ids 0..size-1 onto host ids
base..base+size-1. Files must be owned by the mapped ids, otherwise root inside could not
own or change them and setuid ``sudo`` (owned by container root) would not work.

``chown`` clears setuid/setgid bits and file capabilities, so modes are restored after it.
A file capability or POSIX ACL stores ids inside an xattr; shifting those is not
implemented, so their presence fails the build instead of leaving a wrong id behind.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ._errors import TemplateBuildError

_ID_XATTRS = ("security.capability", "system.posix_acl_access", "system.posix_acl_default")


def _check_xattrs(path: str) -> None:
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return
    for name in names:
        if name in _ID_XATTRS:
            raise TemplateBuildError(
                f"{path} carries {name}, whose embedded ids cannot be shifted; "
                "remove the package that sets it from the recipe"
            )


def shift_ownership(root: Path, base: int, size: int, *, from_base: int = 0) -> int:
    """Move every owner uid/gid under ``root`` from ``from_base + N`` to ``base + N``;
    returns the number of inodes.

    ``from_base`` is non-zero when a shifted tree is brought back to container ids (to
    build a derived template in a chroot). The tree must not be in use (it is a fresh
    build directory)."""
    seen: set[tuple[int, int]] = set()
    count = 0
    root_dev = root.lstat().st_dev
    for dirpath, dirnames, filenames in os.walk(root, topdown=True, followlinks=False):
        for name in [".", *dirnames, *filenames]:
            path = dirpath if name == "." else os.path.join(dirpath, name)
            info = os.lstat(path)
            if info.st_dev != root_dev:
                raise TemplateBuildError(f"{path} is on another filesystem (a leftover mount?)")
            # Hard links share an inode: shift each inode once.
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            uid, gid = info.st_uid - from_base, info.st_gid - from_base
            if not (0 <= uid < size and 0 <= gid < size):
                raise TemplateBuildError(
                    f"{path} is owned by {info.st_uid}:{info.st_gid}, outside the mapped range"
                )
            _check_xattrs(path)
            # SECURITY: gives the file to the sandbox id range (or, unshifting a private
            # build copy, back to container ids); never to any other host id.
            os.lchown(path, base + uid, base + gid)
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(info.st_mode))
            count += 1
    return count
