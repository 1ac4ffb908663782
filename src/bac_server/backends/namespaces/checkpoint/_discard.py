"""A resume's images, deleted after the resume instead of during it.

Once a sandbox runs again, its suspend images are garbage, but deleting them is not free:
unlinking a page image drops its pages from the page cache (~1-2 ms per 64 MiB here, tens
of ms for large sandboxes or a busy disk). ``set_aside`` renames the directories into
``<data>/.discard/`` (one rename each, same file system) so the slot's paths are free at
once, and the caller deletes them in the background (``delete``). A server stopped before
that leaves them behind for ``sweep`` at the next start.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from pathlib import Path

from bac_server.host import remove_tree

_DIR = ".discard"


def set_aside(data_dir: Path, *directories: Path) -> list[Path]:
    """Move ``directories`` (those that exist) out of the way; returns where they went.
    One on another file system is deleted here instead. Blocking."""
    bin_dir = data_dir / _DIR
    moved: list[Path] = []
    for directory in directories:
        if not directory.exists():
            continue
        bin_dir.mkdir(mode=0o700, exist_ok=True)
        target = bin_dir / f"{uuid.uuid4().hex}-{directory.name}"
        try:
            os.rename(directory, target)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            remove_tree(directory)
            continue
        moved.append(target)
    return moved


def delete(paths: list[Path]) -> None:
    """Blocking; for a worker thread."""
    for path in paths:
        remove_tree(path)


def sweep(data_dir: Path) -> None:
    """Delete what an earlier server set aside and never deleted. Blocking."""
    bin_dir = data_dir / _DIR
    with contextlib.suppress(FileNotFoundError):
        for entry in bin_dir.iterdir():
            remove_tree(entry)
