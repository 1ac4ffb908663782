"""Writing files to the disk without stalling everybody else's I/O (blocking calls).

``write_back`` sends one file's dirty pages to the disk a chunk at a time, with at most two
chunks queued at the device: a write of tens of MiB queued at once (what ``fsync`` or
``syncfs`` do) makes every other synchronous I/O on the disk — a wake's record, its pid
file, a neighbour's create — wait behind all of it (~130 ms for 64 MiB on the reference
host, measured on a wake). It stops between chunks once the caller no longer wants it or
the file has been deleted. ``sync_file_range`` only starts and waits for data writes:
``syncfs`` afterwards makes everything durable (allocations, directories, device cache).

Python 3.11 has neither ``os.syncfs`` nor ``os.sync_file_range``: ``host._syscalls`` wraps
glibc's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from bac_server.host._syscalls import (
    SYNC_FILE_RANGE_WAIT_AFTER,
    SYNC_FILE_RANGE_WAIT_BEFORE,
    SYNC_FILE_RANGE_WRITE,
    sync_file_range,
    syncfs,
)

_WAIT_FOR_ONE = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER
CHUNK = 4 << 20  # what another writer may find queued ahead of it, at most twice
SMALL = 1 << 20  # files below are left to ``syncfs`` (images' metadata, small files)


def write_back(path: Path, wanted: Callable[[], bool]) -> bool:
    """Write ``path``'s dirty pages and wait for them, chunk by chunk; False if it
    stopped early (not ``wanted`` any more, or deleted). Only a regular file is opened,
    never a link followed, nothing read: checkpoints hold the sandbox's own files."""
    try:
        # SECURITY: O_NOFOLLOW | O_NONBLOCK and a regular-file check: a sandbox's FIFO,
        # device node or link in a copied upper layer is never opened through.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return True  # gone (nothing to keep), or a link: not a file to write
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return True
        previous: int | None = None
        for offset in range(0, info.st_size, CHUNK):
            if not wanted() or os.fstat(fd).st_nlink == 0:
                return False
            sync_file_range(fd, offset, CHUNK, SYNC_FILE_RANGE_WRITE, str(path))
            if previous is not None:  # two chunks queued: wait for the older
                sync_file_range(fd, previous, CHUNK, _WAIT_FOR_ONE, str(path))
            previous = offset
        if previous is not None:
            sync_file_range(fd, previous, CHUNK, _WAIT_FOR_ONE, str(path))
        return True
    finally:
        os.close(fd)


def large_files(tree: Path) -> Iterator[Path]:
    """Regular files of ``SMALL`` bytes or more under ``tree`` (links not followed)."""
    for directory, _dirs, files in os.walk(tree):
        for name in files:
            path = Path(directory, name)
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size >= SMALL:
                yield path


def sync_file_systems(paths: list[Path]) -> int:
    """``syncfs`` once on each file system holding one of ``paths`` (directories; those
    that still exist); returns how many. Raises the first ``OSError`` of a ``syncfs``."""
    by_device: dict[int, int] = {}
    try:
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError):
                continue  # renamed away or deleted since: no longer needed on disk
            device = os.fstat(fd).st_dev
            if device in by_device:
                os.close(fd)
            else:
                by_device[device] = fd
        for fd in by_device.values():
            syncfs(fd)
    finally:
        for fd in by_device.values():
            os.close(fd)
    return len(by_device)
