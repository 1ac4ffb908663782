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


def shift_ownership(root: Path, base: int, size: int) -> int:
    """Add ``base`` to every owner uid/gid under ``root``; returns the number of inodes.

    The tree must not be in use (it is a fresh build directory)."""
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
            if info.st_uid >= size or info.st_gid >= size:
                raise TemplateBuildError(
                    f"{path} is owned by {info.st_uid}:{info.st_gid}, outside the mapped range"
                )
            _check_xattrs(path)
            # SECURITY: gives the file to the sandbox id range; never to a host id below it.
            os.lchown(path, base + info.st_uid, base + info.st_gid)
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(info.st_mode))
            count += 1
    return count
