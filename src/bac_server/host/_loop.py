"""Loop devices: a file attached as a block device that detaches itself once unused.

A slot's disk (``backends.namespaces.slots._disk``) is an ext4 file system in an image
file, mounted through a loop device. The device is configured with one ``LOOP_CONFIGURE``
(Linux >= 5.8) and ``LO_FLAGS_AUTOCLEAR``: the kernel detaches it when its last user goes,
which is the mount once the caller has closed the device, so unmounting the disk is the
whole teardown and nothing can leak a device even if the server dies between the steps.
``LO_FLAGS_DIRECT_IO`` keeps the image's pages out of the host's page cache (the file
system inside caches them once, charged to the sandbox); a host file system without
direct I/O gets a buffered device instead.

Finding a free device and configuring it are two calls: every allocator between them is
handed the same free device, and all but one are refused it (``EBUSY``) and ask again.
A burst of creates asks for dozens at once, and several Bac processes may ask on one
machine (node agents beside each other, a volume made during a burst), so the two calls
are made under an exclusive ``flock`` of ``/dev/loop-control`` (each allocation opens its
own, so it orders this process's threads and the machine's other Bac processes alike).
Another program's allocation can still take a device in between: that costs a retry.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
from collections.abc import Iterator
from pathlib import Path

LOOP_CONTROL = "/dev/loop-control"
_LOOP_CTL_GET_FREE = 0x4C82
_LOOP_CONFIGURE = 0x4C0A
_LO_FLAGS_AUTOCLEAR = 4
_LO_FLAGS_DIRECT_IO = 16
_BLOCK_SIZE = 4096
# struct loop_config: fd, block_size, struct loop_info64, 8 reserved u64.
_INFO64 = "QQQQQIIII64s64s32sQQ"
_CONFIG = "=II" + _INFO64 + "8Q"
# A program that does not take the lock (losetup) may take the free device between
# asking and configuring it.
_TRIES = 16


def _config(backing_fd: int, flags: int, name: str) -> bytes:
    return struct.pack(_CONFIG, backing_fd, _BLOCK_SIZE,
                       0, 0, 0, 0, 0,  # device, inode, rdevice, offset, sizelimit
                       0, 0, 0, flags,  # number, encrypt type, key size, flags
                       name.encode()[:63], b"", b"", 0, 0,
                       *([0] * 8))


def _configure(device_fd: int, backing_fd: int, name: str) -> None:
    try:
        fcntl.ioctl(device_fd, _LOOP_CONFIGURE,
                    _config(backing_fd, _LO_FLAGS_AUTOCLEAR | _LO_FLAGS_DIRECT_IO, name))
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        # A backing file system without direct I/O (or another block size): buffered.
        fcntl.ioctl(device_fd, _LOOP_CONFIGURE, _config(backing_fd, _LO_FLAGS_AUTOCLEAR, name))


@contextlib.contextmanager
def loop_device(backing_fd: int, name: str) -> Iterator[str]:
    """A free loop device attached to ``backing_fd``; yields its path. The device is held
    open until the block ends: mount it inside, and it lives as long as the mount.
    ``name`` is shown in ``losetup`` (the image's path)."""
    control = os.open(LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
    device_fd = -1
    try:
        # Released with the descriptor, below, or by the kernel should the process die.
        fcntl.flock(control, fcntl.LOCK_EX)
        for _ in range(_TRIES):
            index = fcntl.ioctl(control, _LOOP_CTL_GET_FREE)
            path = f"/dev/loop{index}"
            device_fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            try:
                # SECURITY: attaches a file of the server's own (a slot's image, 0600 root)
                # to a device nobody else holds; autoclear detaches it with its last user.
                _configure(device_fd, backing_fd, name)
                break
            except OSError as exc:
                os.close(device_fd)
                device_fd = -1
                if exc.errno != errno.EBUSY:
                    raise
        else:
            raise OSError(errno.EBUSY, "no free loop device after several tries")
    finally:
        os.close(control)
    try:
        yield path
    finally:
        os.close(device_fd)


def loop_backing_files() -> dict[str, str]:
    """Every attached loop device and its backing file's path as the kernel reports it
    (`` (deleted)`` appended once the file is unlinked)."""
    found: dict[str, str] = {}
    for entry in Path("/sys/block").glob("loop*"):
        with contextlib.suppress(OSError):
            found[f"/dev/{entry.name}"] = (entry / "loop" / "backing_file").read_text().strip()
    return found
