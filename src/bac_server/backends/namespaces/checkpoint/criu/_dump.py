"""Saving a slot's processes to disk and bringing them back with CRIU, one call each.

A dump is taken from a frozen cgroup: CRIU then finds it frozen (instead of freezing it
and polling every 100 ms) and the caller can copy the files at exactly the moment the
memory is saved. Images live in a directory the caller chooses; CRIU's logs go to a
separate work directory, so images of a checkpoint are never written by a restore.

CRIU is run directly (``_args``, ``_run``, ``_cgroups``); through runc
(``_runc``) only with a CRIU lacking Bac's patches, on a unified-cgroup host,
and for images runc saved. Each
direct dump leaves ``bac-criu.json`` beside its images: envd's stdio keys, the device
rules and confinement of the sandbox (re-applied and checked at restore, see
``_confinement``), its network namespace, and what became of its TCP connections:

* with Bac's CRIU, dumps save them in repair mode; a **suspend** (the processes end)
  also holds them: the host drops every packet to and from the sandbox's address
  (``network._tcp_hold``) from before the dump until the restore has taken them all back, so
  peers see a stall, not a reset. If the hold cannot be taken, CRIU locks them itself
  (an nftables table in the sandbox's namespace, ``meta["locked"]``, as older images
  were saved): never are connections saved with neither;
* a restore of a **checkpoint** (a roll-back, a copy) or in a new network namespace
  (after a reboot) keeps only the connections between loopback addresses (processes of
  the sandbox talking to each other): the original's peers talk to the original, and its
  address may not exist here. A restore that fails keeping connections is retried with
  all of them closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bac_server.backends.base import CheckpointFailed
from bac_server.cancel_safe import to_the_end
from bac_server.host import CgroupLayout, write_private

from ...network import tcp_hold
from ...slots import (
    LOCK_MARKER,
    Context,
    SlotPaths,
    SlotRecord,
    devfs,
    netns_pin,
    reap_if_child,
    start_time,
)
from . import _confinement, _lazy_pages, _manifest
from ._args import dump_argv
from ._cgroups import devices_of, direct_supported
from ._restore import release_hold, restore_direct
from ._run import criu_errors, has_connections, release_network_lock, run_dump
from ._runc import runc_dump, runc_restore
from ._tool import Criu, stdio_keys

_log = logging.getLogger(__name__)
_FREEZE_TIMEOUT_S = 10.0
META_FILE = "bac-criu.json"


@dataclass(frozen=True)
class Images:
    """Where one dump's images and logs go."""

    images: Path
    work: Path


def _image_dirs(where: Images, sandbox_gid: int) -> None:
    """The images' directory is root's alone (they hold the sandbox's memory: its env
    vars, its envd token); the way to it is traversable by the sandbox's gid, for the
    restores that open it (``_images_open``). Logs stay root's."""
    where.work.mkdir(mode=0o700, parents=True, exist_ok=True)
    for directory, mode, gid in ((where.images.parent, 0o710, sandbox_gid),
                                 (where.images, 0o700, 0)):
        directory.mkdir(mode=mode, exist_ok=True)
        os.chown(directory, 0, gid)
        directory.chmod(mode)


# Restores in flight per images directory (copies of one snapshot may restore at once).
_opened: dict[Path, int] = {}


@contextlib.contextmanager
def _images_open(images: Path, sandbox_gid: int) -> Iterator[None]:
    """Let the sandbox's root read ``images`` while a restore runs, and never else.

    Restored tasks open images themselves (pagemap, pages, namespaces, /dev's tmpfs) as
    the sandbox's root, an unprivileged host uid; CRIU and the lazy-pages daemon are root.
    At rest the directory is 0700 root, so no sandbox (escaped or not) reads another's
    memory; a crash mid-restore leaves it open until the next start closes it
    (``slots._files.prepare_data_dirs``)."""
    if not _opened.get(images):
        # SECURITY: only the sandbox root gid gains read access, for this restore.
        os.chown(images, 0, sandbox_gid)
        images.chmod(0o750)
    _opened[images] = _opened.get(images, 0) + 1
    try:
        yield
    finally:
        _opened[images] -= 1
        if not _opened[images]:
            del _opened[images]
            with contextlib.suppress(FileNotFoundError):  # deleted meanwhile
                images.chmod(0o700)
                os.chown(images, 0, 0)


def _fully_frozen(ctx: Context, record: SlotRecord) -> bool:
    if ctx.cgroups.layout is CgroupLayout.V2:
        return ctx.cgroups.is_frozen(record.cgroup_path)
    return ctx.cgroups.read(record.cgroup_path, "freezer", "freezer.state") == "FROZEN"


def freeze(ctx: Context, record: SlotRecord) -> bool:
    """Freeze the slot's cgroup and wait until every task is frozen; False if it already
    was (the caller then leaves it frozen)."""
    if ctx.cgroups.is_frozen(record.cgroup_path):
        return False
    ctx.cgroups.set_frozen(record.cgroup_path, True)
    deadline = time.monotonic() + _FREEZE_TIMEOUT_S
    # The freezer has no change notification here: poll (FREEZING -> FROZEN).
    while not _fully_frozen(ctx, record):
        if time.monotonic() > deadline:
            ctx.cgroups.set_frozen(record.cgroup_path, False)
            raise CheckpointFailed(f"slot {record.slot}: cgroup did not freeze in "
                                   f"{_FREEZE_TIMEOUT_S:.0f} s")
        time.sleep(0.0005)
    return True


async def freeze_all(ctx: Context, records: Sequence[SlotRecord]) -> dict[str, str]:
    """Freeze every slot's cgroup at once and wait, on the event loop, until all are
    frozen: each write starts its freeze and returns, then every cgroup is polled (the
    freezer has no change notification here). Returns the slots that did not freeze in
    time (thawed again) with why; one already frozen counts as frozen."""
    pending: list[SlotRecord] = []
    failed: dict[str, str] = {}
    for record in records:
        if ctx.cgroups.is_frozen(record.cgroup_path) and _fully_frozen(ctx, record):
            continue
        if ctx.cgroups.set_frozen(record.cgroup_path, True):
            pending.append(record)
        else:
            failed[record.slot] = "its cgroup is gone"
    deadline = time.monotonic() + _FREEZE_TIMEOUT_S
    while pending:
        pending = [r for r in pending if not _fully_frozen(ctx, r)]
        if not pending:
            break
        if time.monotonic() > deadline:
            for record in pending:
                ctx.cgroups.set_frozen(record.cgroup_path, False)
                failed[record.slot] = f"its cgroup did not freeze in {_FREEZE_TIMEOUT_S:.0f} s"
            break
        await asyncio.sleep(0.0005)
    return failed


def thaw(ctx: Context, record: SlotRecord) -> None:
    ctx.cgroups.set_frozen(record.cgroup_path, False)


async def dump(ctx: Context, criu: Criu, record: SlotRecord, where: Images, *,
               leave_running: bool) -> dict[str, Any] | None:
    """Save the slot's processes (cgroup already frozen by the caller). Without
    ``leave_running`` they are gone afterwards and their memory is freed. Returns the
    metadata written beside the images (None: runc saved them, with none)."""
    assert record.init_pid is not None
    pid = record.init_pid
    # A lazy restore may still be copying memory in: save only what is all back.
    await _lazy_pages.settle(record.slot)
    _image_dirs(where, ctx.config.id_range.root)
    if not (criu.direct and direct_supported(ctx.cgroups)):
        await runc_dump(ctx, criu.binary, record, where.images, where.work,
                        leave_running=leave_running)
        return None
    paths = ctx.paths(record.slot)
    netns = netns_pin(paths)
    keep_tcp = criu.tcp_repair
    config = json.loads(paths.config.read_text())
    # Only a suspend's connections outlive their sockets: they are held until the wake.
    # A checkpoint's are restored closed (or, over the loopback, never leave the sandbox).
    hold = keep_tcp and not leave_running and has_connections(pid)
    try:
        held = hold and await _take_hold(paths, record)
        meta: dict[str, Any] = {
            "format": _manifest.FORMAT, "stdio": stdio_keys(pid),
            "netns": os.stat(netns).st_ino,
            "devices": devices_of(ctx.cgroups, record.cgroup_path),
            "confinement": _confinement.observe(pid),
            "tcp": "established" if keep_tcp else "close", "suspend": not leave_running,
            "held": held, "locked": hold and not held,  # locked: CRIU's own lock
            "dev": devfs.scan(pid, config)}
        argv = dump_argv(criu.binary, config, pid=pid, images=where.images, work=where.work,
                         freezer=ctx.cgroups.dirs(record.cgroup_path)["freezer"],
                         stdio=meta["stdio"], leave_running=leave_running,
                         tcp_established=keep_tcp, network_lock=meta["locked"],
                         dev_external=meta["dev"] is not None)
        write_private(where.images / META_FILE, json.dumps(meta))
        if meta["locked"]:
            (paths.root / LOCK_MARKER).touch()  # before the lock exists: never one unrecorded
        code, err = await run_dump(argv, netns)
        if code != 0:
            raise CheckpointFailed(
                f"checkpoint of slot {record.slot} failed (criu exit {code}): "
                f"{err.strip()[-300:]}\n{criu_errors(where.work / 'dump.log')}")
    except BaseException:
        await _drop_hold(paths)  # the sandbox goes on running (CRIU let go of its lock)
        raise
    _manifest.record(where.images)  # last: what a restore checks the images against
    if not leave_running:
        # The server is the init's subreaper: collect it now, so no zombie stays behind.
        reap_if_child(pid)
    return meta


async def restore(ctx: Context, criu: Criu, record: SlotRecord, where: Images, *,
                  lazy: bool = True) -> None:
    """Start the slot's sandbox from ``where`` (config: the slot's config.json); the
    record learns the new init pid. On failure nothing of the attempt is left running.
    ``lazy=False``: all memory is back before it runs (``_lazy_pages``: a copy of a start
    snapshot, whose memory its first calls touch nearly all of)."""
    paths = ctx.paths(record.slot)
    where.work.mkdir(mode=0o700, parents=True, exist_ok=True)
    # CRIU reopens the inherited log through /proc as the sandbox's root (an unprivileged
    # host uid): that uid must be able to open it. It gains nothing: envd already holds
    # the file open for writing, and no path to it exists inside the sandbox.
    log = os.open(paths.envd_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.fchown(log, ctx.config.id_range.root, ctx.config.id_range.root)
        with _images_open(where.images, ctx.config.id_range.root):
            meta = _checked_meta(where.images)
            if meta is not None:
                pid = await restore_direct(ctx, criu, record, where.images, where.work, meta,
                                           log, lazy=lazy)
            else:
                pid = await runc_restore(ctx, criu.binary, record, where.images, where.work,
                                         log)
    finally:
        os.close(log)
    record.init_pid, record.init_start = pid, start_time(pid)
    write_private(paths.pid_file, f"{pid}\n")


def check_images(images: Path) -> None:
    """Raise ``CheckpointFailed`` unless ``images`` is there and, when Bac's dump wrote it,
    holds every file the dump listed (what a restore checks first, without restoring)."""
    if not images.is_dir():
        raise CheckpointFailed(f"{images} is missing")
    _checked_meta(images)


def _checked_meta(images: Path) -> dict[str, Any] | None:
    """The metadata of images a direct dump wrote, once their list of files is checked;
    None for images runc's checkpoint wrote (they have neither)."""
    meta_file = images / META_FILE
    if not meta_file.exists():
        return None
    meta = _read_meta(meta_file)
    _manifest.check(images, int(meta.get("format", 1)))
    return meta


def _read_meta(meta_file: Path) -> dict[str, Any]:
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointFailed(f"{meta_file} is unreadable: {exc}") from exc
    if not isinstance(meta, dict):
        raise CheckpointFailed(f"{meta_file} is unreadable")
    return meta


async def _take_hold(paths: SlotPaths, record: SlotRecord) -> bool:
    """Hold the sandbox's connections on the host; False when that failed (an older host
    table without the set, netlink refused): CRIU then locks them itself."""
    try:
        # To the end even when cancelled: the caller then finds the hold and releases it.
        await to_the_end(tcp_hold.take(paths.root, record.sandbox_address))
    except (tcp_hold.HoldError, OSError) as exc:
        _log.warning("slot %s: holding its TCP connections on the host failed, CRIU locks "
                     "them instead: %s", record.slot, exc)
        return False
    return True


async def _drop_hold(paths: SlotPaths) -> None:
    """Release a hold the slot may have (taken, or being taken when cancelled)."""
    if tcp_hold.is_held(paths.root):
        try:
            await release_hold(paths.root)
        except CheckpointFailed:
            _log.exception("the TCP hold of %s could not be released", paths.root)


async def release_suspend_lock(ctx: Context, record: SlotRecord) -> None:
    """Drop the hold or network lock of a suspend whose images are discarded, if it took
    one (also at start-up, for a sandbox that is not suspended to disk)."""
    paths = ctx.paths(record.slot)
    await release_hold(paths.root)
    marker = paths.root / LOCK_MARKER
    if marker.exists():
        await release_network_lock(netns_pin(paths))
        marker.unlink(missing_ok=True)


def remove_images(where: Images) -> None:
    for directory in (where.images, where.work):
        shutil.rmtree(directory, ignore_errors=True)
