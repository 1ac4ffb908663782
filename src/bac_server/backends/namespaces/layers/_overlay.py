"""Overlay layers on the host: a stack mounted as one tree, a layer copied whole.

A sandbox's root, a build step's root and a roll-back's files are all overlays of
read-only layers (topmost first) under one writable upper layer; a checkpoint keeps a
copy of that upper layer, with everything overlayfs keeps in it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

from bac_server.backends.base import CheckpointFailed
from bac_server.host._syscalls import (
    FSCONFIG_CMD_CREATE,
    FSCONFIG_SET_FLAG,
    MOUNT_ATTR_NODEV,
    MS_NODEV,
    fsconfig,
    fsmount,
    fsopen,
    mount,
    move_mount,
)

# Legacy mount(2) data is one page, NUL included; longer layer lists need the new API.
_PAGE = os.sysconf("SC_PAGESIZE")
# overlayfs stacks at most this many lower layers (OVL_MAX_STACK).
MAX_LAYERS = 500


def mount_overlay(target: Path, layers: Sequence[Path], upper: Path, work: Path,
                  options: Sequence[str] = ()) -> None:
    """Mount ``layers`` (topmost first, read-only) under ``upper`` at ``target`` (nodev)."""
    if not layers or len(layers) > MAX_LAYERS:
        raise ValueError(f"an overlay takes 1..{MAX_LAYERS} layers, got {len(layers)}")
    for part in (*layers, upper, work):
        if any(c in str(part) for c in ",:\\"):
            raise ValueError(f"overlay paths may not contain ',', ':' or '\\': {part}")
    data = ",".join([f"lowerdir={':'.join(map(str, layers))}", f"upperdir={upper}",
                     f"workdir={work}", *options])
    if len(data.encode()) < _PAGE:
        # SECURITY: the layers stay read-only below; every write lands in ``upper``.
        mount("overlay", str(target), "overlay", MS_NODEV, data)
        return
    fs_fd = fsopen("overlay")
    try:
        try:
            fsconfig(fs_fd, "source", "overlay")
            for layer in layers:
                fsconfig(fs_fd, "lowerdir+", str(layer))
            fsconfig(fs_fd, "upperdir", str(upper))
            fsconfig(fs_fd, "workdir", str(work))
            for option in options:
                key, has_value, value = option.partition("=")
                if has_value:
                    fsconfig(fs_fd, key, value)
                else:
                    fsconfig(fs_fd, key, command=FSCONFIG_SET_FLAG)
            fsconfig(fs_fd, None, command=FSCONFIG_CMD_CREATE)
        except OSError as exc:
            raise OSError(exc.errno, f"{exc.strerror} {_kernel_says(fs_fd)}".strip(),
                          str(target)) from exc
        mount_fd = fsmount(fs_fd, MOUNT_ATTR_NODEV)
        try:
            # SECURITY: as above; the same mount, made through the new mount API.
            move_mount(mount_fd, str(target))
        finally:
            os.close(mount_fd)
    finally:
        os.close(fs_fd)


def _kernel_says(fs_fd: int) -> str:
    """The filesystem's own explanation of a failed ``fsconfig`` (read from its context)."""
    try:
        return os.read(fs_fd, 1024).decode(errors="replace").removeprefix("e ").strip()
    except OSError:
        return ""


async def copy_tree(source: Path, target: Path) -> None:
    """Copy a layer with everything overlayfs keeps in it (owners, modes, xattrs such as
    ``trusted.overlay.opaque``, whiteout devices, hard links, sparse files); reflinks where
    the filesystem has them."""
    proc = await asyncio.create_subprocess_exec(
        "cp", "-a", "--reflink=auto", "--sparse=always", "--", f"{source}/.", str(target),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise CheckpointFailed(f"copying {source} failed: {err.decode(errors='replace')[-500:]}")
