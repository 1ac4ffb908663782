"""A start snapshot's disk, filled once: the slot-disk image with the checkpoint's files.

A copy restored from a checkpoint runs on a disk of its own holding the checkpoint's files
(its overlay upper layer: CRIU checks the size of every file a process holds open). Put
there per copy, they cost a ``cp`` process and an unmount and mount of the new root, about
20 ms of a 150 ms create. A template's start snapshot is copied for every create of the
template, so its files are put once into an image of the disk's size, kept beside the
checkpoint (``disk-<MiB>m.img``: deleted with it), and each copy's disk is a sparse copy
of that image (under 1 ms), mounted once. The first copy of a size pays the fill (a
prototype copied, mounted, ``cp``, synced: tens of ms). Other checkpoints (a sandbox's
own, restored or forked a few times) are copied per copy, as before: an image would add
their whole size on disk for little gain.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path

from bac_server.cancel_safe import off_loop, to_the_end

from .._config import NamespaceConfig
from ..layers import copy_tree
from ..slots import SeedImage
from ._stored import Stored

# Bump when what the image holds changes: older images are then left unused (and go
# with their checkpoint).
_FORMAT = 1

# One fill per image at a time; waiters then find it made.
_filling: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()


def _image(stored: Stored, disk_mb: int) -> Path:
    return stored.path / f"disk-{disk_mb}m-v{_FORMAT}.img"


async def seeded_disk(config: NamespaceConfig, stored: Stored, disk_mb: int) -> Path:
    """The image of a ``disk_mb`` disk holding ``stored``'s files, made if missing."""
    target = _image(stored, disk_mb)
    if target.exists():
        return target
    lock = _filling.setdefault(target, asyncio.Lock())
    async with lock:
        if not target.exists():
            # To the end even when the create that asked is cancelled: a fill stopped
            # halfway would leave a mount for the next one to clear.
            await to_the_end(_fill(config, stored, SeedImage(target), disk_mb))
    return target


async def _fill(config: NamespaceConfig, stored: Stored, seed: SeedImage,
                disk_mb: int) -> None:
    try:
        await off_loop(lambda: seed.open(config.data_dir, disk_mb, config.id_range))
        await copy_tree(stored.upper, seed.upper)
        await off_loop(seed.publish)
    finally:
        await off_loop(seed.discard)
