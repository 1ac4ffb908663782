"""Whether a dump's images all reached the disk, checked before a restore trusts them.

A pause or checkpoint returns once CRIU has written its images to the page cache; they
reach the disk in the background (``checkpoint._durable``). A host that stops in between (power
loss, kernel crash) can leave an image shorter than CRIU wrote it (ext4 commits a file's
size with its data) or missing altogether. CRIU would fail on some (a missing core
image) and, worse, a lazy restore would find a page image cut short only when its
daemon reads it, after the sandbox runs: those pages would read as zeros. So each dump
ends with a list of its files and their sizes (``MANIFEST``) and each restore checks it
first: a file missing or of another size fails the restore, which leaves a paused
sandbox paused with its files (resuming without memory still works).

Images whose metadata says a list belongs to them (``format`` 2) and that have none are
incomplete; images an older Bac saved (format 1) have none and are trusted as before.
The check costs a ``stat`` per image file (~0.3 ms for a sandbox's ~60).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bac_server.backends.base import CheckpointFailed

MANIFEST = "bac-images.json"
FORMAT = 2  # the metadata format of images that carry a manifest


def record(images: Path) -> None:
    """List ``images``' files with their sizes, once CRIU has written them (blocking)."""
    with os.scandir(images) as entries:
        sizes = {entry.name: entry.stat(follow_symlinks=False).st_size for entry in entries
                 if entry.is_file(follow_symlinks=False) and entry.name != MANIFEST}
    partial = images / f"{MANIFEST}.tmp"
    partial.write_text(json.dumps(sizes, sort_keys=True))
    os.replace(partial, images / MANIFEST)


def images_bytes(images: Path) -> int:
    """What the images in ``images`` hold, in bytes (blocking; a few files)."""
    with os.scandir(images) as entries:
        return sum(entry.stat(follow_symlinks=False).st_size for entry in entries
                   if entry.is_file(follow_symlinks=False))


def check(images: Path, meta_format: int) -> None:
    """Raise ``CheckpointFailed`` unless every listed file is there with its size."""
    try:
        sizes = json.loads((images / MANIFEST).read_text())
    except FileNotFoundError:
        if meta_format >= FORMAT:
            raise CheckpointFailed(f"{images}: the list of saved images is missing: they "
                                   "never all reached the disk") from None
        return
    except ValueError as exc:
        raise CheckpointFailed(f"{images}: the list of saved images is unreadable") from exc
    if not isinstance(sizes, dict):
        raise CheckpointFailed(f"{images}: the list of saved images is unreadable")
    for name, size in sizes.items():
        try:
            actual = os.stat(images / name, follow_symlinks=False).st_size
        except FileNotFoundError:
            raise CheckpointFailed(f"{images}: {name} is missing: the saved images never "
                                   "all reached the disk") from None
        if actual != size:
            raise CheckpointFailed(f"{images}: {name} holds {actual} of its {size} bytes: "
                                   "the saved images never all reached the disk")
