"""Shift a rootfs's ownership once, so container uid N is host uid ``base + N``.

Sandboxes run in a user namespace mapping container ids 0..size-1 onto host ids
base..base+size-1. Files must be owned by the mapped ids, otherwise root inside could not
own or change them and setuid ``sudo`` (owned by container root) would not work.

``chown`` clears setuid/setgid bits and file capabilities, so modes are restored after it.
A file capability or POSIX ACL stores ids inside an xattr; shifting those is not
implemented, so their presence fails the build instead of leaving a wrong id behind.

An image unpacked rootless (by an unprivileged uid, see ``_oci``) is all owned by that
uid, each inode's own ids recorded in a ``user.rootlesscontainers`` xattr (the
rootlesscontainers.io protobuf: uid = 1, gid = 2, absent = 0, 2**32 - 1 = "as on disk",
which is the unpacking uid, so container root); ``shift_recorded_ownership`` applies those
instead of the owners on disk and removes the record.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ._errors import TemplateBuildError

_ID_XATTRS = ("security.capability", "system.posix_acl_access", "system.posix_acl_default")
ROOTLESS_XATTR = "user.rootlesscontainers"
_NOOP_ID = 2**32 - 1  # the record's "unchanged": the file's owner, the unpacking uid


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


def _inodes(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every inode under ``root`` once (hard links share an inode: each is shifted once),
    with a path to it; a mount inside the tree (a leftover) fails the build."""
    seen: set[int] = set()
    root_dev = root.lstat().st_dev
    for dirpath, dirnames, filenames in os.walk(root, topdown=True, followlinks=False):
        for name in [".", *dirnames, *filenames]:
            path = dirpath if name == "." else os.path.join(dirpath, name)
            info = os.lstat(path)
            if info.st_dev != root_dev:
                raise TemplateBuildError(f"{path} is on another filesystem (a leftover mount?)")
            if info.st_ino not in seen:
                seen.add(info.st_ino)
                yield path, info


def _own(path: str, info: os.stat_result, uid: int, gid: int) -> None:
    """Give ``path`` to host ids ``uid:gid``, keeping the setuid/setgid bits chown clears."""
    _check_xattrs(path)
    # SECURITY: both callers checked the ids are ``base + N`` with N in the mapped range:
    # the sandbox id range (or, unshifting a private build copy, container ids); never
    # any other host id.
    os.lchown(path, uid, gid)
    if not stat.S_ISLNK(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
        os.chmod(path, stat.S_IMODE(info.st_mode))


def shift_ownership(root: Path, base: int, size: int, *, from_base: int = 0) -> int:
    """Move every owner uid/gid under ``root`` from ``from_base + N`` to ``base + N``;
    returns the number of inodes.

    ``from_base`` is non-zero when a shifted tree is brought back to container ids (to
    build a derived template in a chroot). The tree must not be in use (it is a fresh
    build directory)."""
    count = 0
    for path, info in _inodes(root):
        uid, gid = info.st_uid - from_base, info.st_gid - from_base
        if not (0 <= uid < size and 0 <= gid < size):
            raise TemplateBuildError(
                f"{path} is owned by {info.st_uid}:{info.st_gid}, outside the mapped range"
            )
        _own(path, info, base + uid, base + gid)
        count += 1
    return count


def _varint(raw: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(raw) and shift <= 35:
        byte = raw[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at
    raise ValueError("a truncated or over-long varint")


def recorded_ids(raw: bytes) -> tuple[int, int]:
    """(uid, gid) of a ``user.rootlesscontainers`` value; ValueError for anything else."""
    ids = [0, 0]
    at = 0
    while at < len(raw):
        key = raw[at]
        if key not in (0x08, 0x10):  # field 1 or 2, varint
            raise ValueError(f"unexpected field key {key:#x}")
        value, at = _varint(raw, at + 1)
        if value > _NOOP_ID:
            raise ValueError(f"id {value} does not fit 32 bits")
        ids[(key >> 3) - 1] = 0 if value == _NOOP_ID else value
    return ids[0], ids[1]


def shift_recorded_ownership(root: Path, unpacker: int, base: int, size: int) -> int:
    """Give every inode under ``root`` (each owned by ``unpacker``, the uid that unpacked
    it rootless) the ids its ``user.rootlesscontainers`` record names, as ``base + N``;
    returns the number of inodes. Anything not owned by ``unpacker`` fails the import."""
    count = 0
    for path, info in _inodes(root):
        if (info.st_uid, info.st_gid) != (unpacker, unpacker):
            raise TemplateBuildError(f"{path} is owned by {info.st_uid}:{info.st_gid}, "
                                     f"not by the unpacking uid {unpacker}")
        try:
            raw = (b"" if stat.S_ISLNK(info.st_mode)
                   else os.getxattr(path, ROOTLESS_XATTR, follow_symlinks=False))
        except OSError as exc:
            if exc.errno != errno.ENODATA:
                raise
            raw = b""
        try:
            uid, gid = recorded_ids(raw)
        except ValueError as exc:
            raise TemplateBuildError(f"{path}: unreadable ownership record: {exc}") from exc
        if not (0 <= uid < size and 0 <= gid < size):
            raise TemplateBuildError(f"{path} is owned by {uid}:{gid}, outside the mapped range")
        _own(path, info, base + uid, base + gid)
        if raw:
            os.removexattr(path, ROOTLESS_XATTR, follow_symlinks=False)
        count += 1
    return count
