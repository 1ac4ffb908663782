"""A direct CRIU restore of a slot from images with ``bac-criu.json`` (see ``_dump``).

Which TCP connections come back is decided here (all after a suspend in the same network
namespace, the loopback ones otherwise, none without Bac's CRIU; on failure once more
with none), then one attempt runs: the lazy-pages daemon started when the memory is
large (``_lazy_pages``), the slot's cgroups and /dev made on the host (``_cgroups``,
``slots._devfs``) while it starts, unless the suspend made them already (``_wake_ahead``), CRIU
started in those cgroups, and the restored init checked (``_confinement``, cgroup
placement).
A suspend's hold on the connections (``network._tcp_hold``) is released once the restore has
finished: the tasks run and CRIU has taken their sockets out of repair mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

from bac_server.backends.base import CheckpointFailed
from bac_server.cancel_safe import to_the_end

from ...network import tcp_hold
from ...slots import (
    LOCK_MARKER,
    Context,
    Limits,
    SlotRecord,
    devfs,
    limits_of,
    netns_pin,
)
from . import _confinement, _lazy_pages, _wake_ahead
from ._args import TCP_ALL, TCP_LOOPBACK, TCP_NONE, restore_argv
from ._cgroups import PLACEMENT_FAILED, check_placement, prepare
from ._run import criu_errors, release_network_lock, run_restore
from ._tool import Criu, inherit_fds

_log = logging.getLogger(__name__)


async def restore_direct(ctx: Context, criu: Criu, record: SlotRecord, images: Path,
                         work: Path, meta: dict[str, Any], log: int, *, lazy: bool) -> int:
    """Restore the slot; returns the init's pid. On failure nothing of it is left running.
    ``lazy``: memory may come back lazily (``_lazy_pages``), if there is enough of it."""
    paths = ctx.paths(record.slot)
    netns = netns_pin(paths)
    marker = paths.root / LOCK_MARKER
    if marker.exists() and not meta["locked"]:
        await release_network_lock(netns)  # a suspend's lock; these images are others
        marker.unlink(missing_ok=True)
    held = meta.get("held", False)  # older images: False
    if not held and tcp_hold.is_held(paths.root):
        await release_hold(paths.root)  # a suspend's hold; these images are others
    tcp = TCP_NONE
    if meta["tcp"] == "established" and criu.tcp_repair:
        same_netns = os.stat(netns).st_ino == meta["netns"]
        suspended = meta.get("suspend", True)  # older images saved connections on suspend only
        tcp = TCP_ALL if suspended and same_netns else TCP_LOOPBACK
    limits = limits_of(ctx, record)
    try:
        pid = await _attempt(ctx, criu, record, images, work, meta, log, limits, tcp=tcp,
                             lazy=lazy)
    except CheckpointFailed as exc:
        if tcp == TCP_NONE:
            raise
        # Connections are a bonus, the sandbox is not: once more with them closed.
        _log.warning("restore of slot %s with its TCP connections failed, restoring them "
                     "closed: %s", record.slot, exc)
        pid = await _attempt(ctx, criu, record, images, work, meta, log, limits,
                             tcp=TCP_NONE, lazy=lazy)
    if meta["locked"]:
        marker.unlink(missing_ok=True)  # CRIU removed its lock
    if held:
        # On failure the caller ends the restored tasks, as after any failed restore;
        # the images and the hold stay for another try.
        await release_hold(paths.root)
    return pid


def make_ahead(ctx: Context, record: SlotRecord, images: Path, meta: dict[str, Any]) -> None:
    """At the end of a suspend: the slot's cgroups and /dev for its wake (``_wake_ahead``;
    blocking)."""
    _wake_ahead.make(ctx.cgroups, ctx.paths(record.slot), record.slot, record.cgroup_path,
                     images, meta, limits_of(ctx, record))


async def release_hold(slot_root: Path) -> None:
    """Let the slot's held packets through (to the end, even if cancelled); raises
    CheckpointFailed if netlink refuses (the hold and its marker stay)."""
    try:
        await to_the_end(tcp_hold.release_on_loop(slot_root))
    except tcp_hold.HoldError as exc:
        raise CheckpointFailed(f"{slot_root}: the TCP hold could not be released: {exc}"
                               ) from exc


async def _attempt(ctx: Context, criu: Criu, record: SlotRecord, images: Path, work: Path,
                   meta: dict[str, Any], log: int, limits: Limits, *, tcp: str,
                   lazy: bool) -> int:
    """One CRIU restore; on failure nothing of it is left running."""
    paths = ctx.paths(record.slot)
    netns = netns_pin(paths)
    pid_file = work / "init.pid"
    pid_file.unlink(missing_ok=True)
    stdio = {int(fd): str(key) for fd, key in meta["stdio"].items()}
    # The daemon first: its start (a CRIU of its own, ~3 ms) overlaps the cgroups and
    # /dev made here, and the restore, which connects to it early, finds it listening.
    daemon = (await _lazy_pages.start(criu.binary, images, work)
              if lazy and criu.lazy and _lazy_pages.worth_it(images) else None)
    try:
        ahead = _wake_ahead.take(ctx.cgroups, record.slot, record.cgroup_path, images, meta,
                                 limits)
        if ahead is not None:
            procs, dev_mount = ahead
        else:
            procs = prepare(ctx.cgroups, record.cgroup_path, meta["devices"], limits)
            dev_mount = devfs.prepare(paths, meta["dev"]) if meta.get("dev") else None
        argv = restore_argv(criu.binary, json.loads(paths.config.read_text()),
                            images=images, work=work, pid_file=pid_file,
                            inherit=inherit_fds(stdio), tcp=tcp, lazy=daemon is not None,
                            devfs=dev_mount)
        code = await run_restore(argv, netns, procs, log, userfaultfd=daemon is not None)
        if code != 0:
            why = ("CRIU could not join the slot's cgroups" if code == PLACEMENT_FAILED
                   else criu_errors(work / "restore.log"))
            raise CheckpointFailed(f"restore of slot {record.slot} failed (exit {code}): {why}")
        pid = int(pid_file.read_text().strip())
        await _check_restored(ctx, record, pid, meta, netns)
    except BaseException:
        if daemon is not None:
            await _lazy_pages.stop(daemon)
        raise
    finally:
        devfs.release(paths)  # the sandbox holds its /dev now, or nobody needs it
    if daemon is not None:
        _lazy_pages.track(record.slot, daemon)
    return pid


async def _check_restored(ctx: Context, record: SlotRecord, pid: int, meta: dict[str, Any],
                          netns: Path) -> None:
    try:
        check_placement(ctx.cgroups, record.cgroup_path, pid)
        _confinement.check(pid, meta["confinement"], netns)
    except CheckpointFailed:
        # SECURITY: the init is pid 1 of the sandbox's pid namespace: killing it ends
        # every restored task, wherever they are.
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            await asyncio.to_thread(os.waitpid, pid, 0)
        raise
