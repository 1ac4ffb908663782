"""The host side of a wake, made when the sandbox is suspended instead of when it wakes.

A direct CRIU restore runs inside the slot's cgroups and binds in a /dev made on the
host (``_cgroups.prepare``, ``slots._devfs.prepare``): a dozen cgroup directories and
writes and a tmpfs with its entries, 3-8 ms of a resume on the 2-vCPU reference host
(more while the restore of another sandbox competes for the CPUs). A suspend already
knows what its wake will need, so it makes both right after its dump (``make``), and
the wake takes them (``take``) if they are still exactly what the images ask for: the
slot's cgroup in every hierarchy with the saved device rules and the slot's limits, and
/dev still mounted. Anything else (a server restart, which forgets what was made; a
reboot, which removes it; other images, as for a roll-back) and the restore makes them
itself, as it always did; ``prepare`` and ``slots._devfs.prepare`` take over what is there.

Nothing here outlives the sandbox: the teardown removes the slot's cgroups and /dev
mount whatever made them, and a wake without memory drops them (``discard``). While
the sandbox is suspended they hold no process and no memory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bac_server.backends.base import CheckpointFailed
from bac_server.host import is_mount_point

from ...slots import CgroupTree, Limits, SlotPaths, devfs
from ._cgroups import devices_of, prepare

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ahead:
    """What ``make`` made for the restore from ``images``."""

    images: Path
    devices: tuple[str, ...]
    dev: Any  # the images' /dev entries (``slots._devfs.scan``), or None: CRIU restores /dev
    limits: Limits
    procs: list[str]  # the cgroup.procs files the restore joins
    devfs: Path | None


_made: dict[str, Ahead] = {}  # by slot


def make(cgroups: CgroupTree, paths: SlotPaths, slot: str, relative: str, images: Path,
         meta: dict[str, Any], limits: Limits) -> None:
    """Make the slot's cgroups and /dev for the restore from ``images`` (blocking). On
    failure nothing is remembered and the wake makes them itself."""
    _made.pop(slot, None)
    try:
        procs = prepare(cgroups, relative, meta["devices"], limits)
        dev_mount = devfs.prepare(paths, meta["dev"]) if meta.get("dev") else None
    except (CheckpointFailed, OSError) as exc:
        _log.warning("slot %s: cgroups and /dev for its wake not made ahead: %s", slot, exc)
        return
    _made[slot] = Ahead(images, tuple(sorted(meta["devices"])), meta.get("dev"), limits,
                        procs, dev_mount)


def take(cgroups: CgroupTree, slot: str, relative: str, images: Path,
         meta: dict[str, Any], limits: Limits) -> tuple[list[str], Path | None] | None:
    """The cgroup.procs files and /dev made ahead for this restore, or None if nothing
    was, or what was is not exactly what it needs. Forgotten either way: a restore that
    fails makes them again."""
    ahead = _made.pop(slot, None)
    if ahead is None or ahead.images != images or ahead.limits != limits \
            or ahead.dev != meta.get("dev") \
            or ahead.devices != tuple(sorted(meta["devices"])):
        return None
    # SECURITY: the restore must start in the slot's own cgroups with exactly the saved
    # device rules; anything else is made again by ``prepare`` (deny all, then allow).
    try:
        if not all(directory.is_dir() for directory in cgroups.dirs(relative).values()):
            return None
        if tuple(sorted(devices_of(cgroups, relative))) != ahead.devices:
            return None
    except OSError:
        return None
    if ahead.devfs is not None and not is_mount_point(ahead.devfs):
        return None
    return ahead.procs, ahead.devfs


def discard(cgroups: CgroupTree, paths: SlotPaths, slot: str, relative: str) -> None:
    """Remove what was made for a wake that will not restore (blocking)."""
    if _made.pop(slot, None) is not None:
        devfs.release_now(paths)
        cgroups.remove(relative)


def forget(slot: str) -> None:
    """The slot is torn down (its cgroups and /dev go with it)."""
    _made.pop(slot, None)
