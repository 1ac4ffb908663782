"""Thin ctypes wrappers for the mount, namespace, hostname, write-back and openat2 syscalls
Python lacks (3.11).

Each raises ``OSError`` with the real errno; callers decide what a failure means.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
UMOUNT_NOFOLLOW = 0x8
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000


def _check(result: int, what: str, target: str | None = None) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}", target)


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        _libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                    ctypes.c_ulong(flags), data.encode() if data else None),
        "mount", target,
    )


def umount(target: str, flags: int = UMOUNT_NOFOLLOW) -> None:
    _check(_libc.umount2(target.encode(), flags), "umount", target)


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc.sethostname(raw, len(raw)), "sethostname", name)


_libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
SYNC_FILE_RANGE_WAIT_BEFORE = 1
SYNC_FILE_RANGE_WRITE = 2
SYNC_FILE_RANGE_WAIT_AFTER = 4


def sync_file_range(fd: int, offset: int, length: int, flags: int,
                    target: str | None = None) -> None:
    _check(_libc.sync_file_range(fd, offset, length, flags), "sync_file_range", target)


def syncfs(fd: int) -> None:
    """Write back everything of the file system holding ``fd``, and wait."""
    _check(_libc.syncfs(fd), "syncfs")


# The new mount API (Linux >= 5.2; overlayfs' ``lowerdir+`` needs >= 6.8). The numbers
# are the same on every architecture (syscalls from 424 on are unified).
_SYS_MOVE_MOUNT, _SYS_FSOPEN, _SYS_FSCONFIG, _SYS_FSMOUNT = 429, 430, 431, 432
FSOPEN_CLOEXEC = 0x1
FSCONFIG_SET_FLAG = 0
FSCONFIG_SET_STRING = 1
FSCONFIG_CMD_CREATE = 6
FSMOUNT_CLOEXEC = 0x1
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOVE_MOUNT_F_EMPTY_PATH = 0x4
_AT_FDCWD = -100


def _fd_or_raise(result: int, what: str, target: str | None = None) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}", target)
    return result


def fsopen(fs_type: str) -> int:
    """A filesystem context (close-on-exec) to configure with ``fsconfig``."""
    return _fd_or_raise(_libc.syscall(ctypes.c_long(_SYS_FSOPEN), fs_type.encode(),
                                      ctypes.c_uint(FSOPEN_CLOEXEC)), "fsopen", fs_type)


def fsconfig(fs_fd: int, key: str | None, value: str | None = None, *,
             command: int = FSCONFIG_SET_STRING) -> None:
    """Set one parameter (``value`` None with ``FSCONFIG_SET_FLAG``) or run a command."""
    _check(_libc.syscall(ctypes.c_long(_SYS_FSCONFIG), ctypes.c_int(fs_fd),
                         ctypes.c_uint(command), key.encode() if key else None,
                         value.encode() if value is not None else None, ctypes.c_int(0)),
           "fsconfig", key)


def fsmount(fs_fd: int, attr_flags: int) -> int:
    """A detached mount (close-on-exec fd) of a created filesystem context."""
    return _fd_or_raise(_libc.syscall(ctypes.c_long(_SYS_FSMOUNT), ctypes.c_int(fs_fd),
                                      ctypes.c_uint(FSMOUNT_CLOEXEC), ctypes.c_uint(attr_flags)),
                        "fsmount")


def move_mount(mount_fd: int, target: str) -> None:
    """Attach a detached mount at ``target``."""
    _check(_libc.syscall(ctypes.c_long(_SYS_MOVE_MOUNT), ctypes.c_int(mount_fd), b"",
                         ctypes.c_int(_AT_FDCWD), target.encode(),
                         ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH)), "move_mount", target)


# openat2 (Linux >= 5.6, number 437 on every architecture): a path resolved by the kernel
# under the constraints given, whatever the path's components turn out to be.
_SYS_OPENAT2 = 437
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
# Confined to the tree under the directory fd: no symlink (nor /proc magic link) of it
# followed, no mount crossed, no absolute name or '..' leaving it.
RESOLVE_IN_TREE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


def openat2(dir_fd: int, path: str, flags: int, mode: int = 0,
            resolve: int = RESOLVE_IN_TREE) -> int:
    """``open(path, flags, mode)`` relative to ``dir_fd``, resolved as ``resolve`` says
    (``mode`` only with ``O_CREAT``/``O_TMPFILE``: the kernel refuses it otherwise)."""
    how = _OpenHow(flags, mode, resolve)
    return _fd_or_raise(_libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dir_fd),
                                      os.fsencode(path), ctypes.byref(how),
                                      ctypes.c_size_t(ctypes.sizeof(how))), "openat2", path)
