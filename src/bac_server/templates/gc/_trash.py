"""Deleting entries in two steps: a rename into a trash directory, then the removal.

A layer or rootfs is a large tree, and removing it takes a while; if the process died
half-way, what remained would still look like a layer (or a rootfs) to a reader. So an
entry is first renamed, in one step, into ``.trash/`` beside it (same file system),
while its build lock is held, so no build is publishing the same name at that moment;
from then on nobody finds it, and the tree is removed at leisure. A removal cut short
is finished by the next collection (``empty``).
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from bac_server.host import HostSetupError, remove_tree

from ._guard import try_lock
from ._scan import Entry, Kind

TRASH = ".trash"
_log = logging.getLogger(__name__)


def trash_dir(entry: Entry) -> Path:
    """``.trash`` of the directory holding the entry (a built-in's: of ``templates``)."""
    parent = entry.path.parent.parent if entry.kind is Kind.BUILTIN else entry.path.parent
    return parent / TRASH


def move_to_trash(entry: Entry) -> Path | None:
    """Rename ``entry`` into its trash; None when its build lock is held (someone is
    building that very name) or it is already gone."""
    fd = try_lock(entry.lock) if entry.lock is not None else None
    if entry.lock is not None and fd is None:
        return None
    try:
        trash = trash_dir(entry)
        trash.mkdir(mode=0o700, exist_ok=True)
        target = trash / f"{entry.path.name}.{secrets.token_hex(4)}"
        try:
            os.rename(entry.path, target)
        except FileNotFoundError:
            return None
        if entry.kind in (Kind.LAYER, Kind.IMAGE) and entry.lock is not None:
            # Its lock file goes with it. Safe: every builder and importer of this root
            # holds the collection guard shared, which the caller holds exclusively.
            entry.lock.unlink(missing_ok=True)
        return target
    finally:
        if fd is not None:
            os.close(fd)


def empty(trash: Path) -> int:
    """Remove ``trash`` and everything in it; returns how many entries it held. It is
    renamed aside first and removed as one tree (one check for mounts below it, however
    many entries); a removal that fails is logged and finished by the next call."""
    removed = 0
    doomed = trash.with_name(f"{TRASH}.{secrets.token_hex(4)}")
    try:
        removed = len(os.listdir(trash))
        os.rename(trash, doomed)
    except FileNotFoundError:
        removed = 0
    for leftover in sorted(trash.parent.glob(f"{TRASH}.*")):
        try:
            remove_tree(leftover)
        except (OSError, HostSetupError) as exc:
            _log.warning("could not remove %s: %s", leftover, exc)
    return removed
