"""Remove everything a slot made. One idempotent function for destroy, failure and recovery.

Order matters: processes first (a runtime command a dead server left making the slot's
container, then the cgroup: freeze, kill every member, thaw, wait until each has exited),
then the runtime's state and the cgroups, then the network and, at the same time, the
mounts and files (independent, and each mostly waits on the kernel), then the address;
the slot's record goes last so an interrupted teardown is found and finished later.
``undo_after_failure`` runs it to the end even when its caller is cancelled;
``stop_processes`` is its first half, for a suspend or a roll-back (files, mount, network
and address stay).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import time
from pathlib import Path

from bac_server.backends.base import CheckpointFailed
from bac_server.cancel_safe import to_the_end
from bac_server.host import remove_partial_writes

from ..network import LeaseOwner, delete_veth
from ._context import Context
from ._disk import unmount_disk
from ._files import unmount_rootfs
from ._process import is_alive, kill_pidfd, reap_if_child
from ._record import SlotPhase, SlotRecord
from ._restorable import remove_slot_state

_log = logging.getLogger(__name__)
_KILL_TIMEOUT_S = 10.0


def _wait_exited(pidfds: list[int], timeout: float) -> bool:
    """Block until every pidfd reports its process gone (pidfds poll readable on exit)."""
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    pending = set(pidfds)
    deadline = time.monotonic() + timeout
    while pending:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return False
        for fd, _event in poller.poll(left_ms):
            pending.discard(fd)
            poller.unregister(fd)
    return True


def kill_processes(ctx: Context, record: SlotRecord) -> bool:
    """Kill every process of the slot; True once none is left."""
    cgroup = record.cgroup_path
    for _round in range(5):
        # SECURITY: freezing first means nothing can fork between listing and killing.
        frozen = ctx.cgroups.set_frozen(cgroup, True)
        pids = ctx.cgroups.procs(cgroup)
        if is_alive(record.init_pid, record.init_start) and record.init_pid is not None:
            pids.add(record.init_pid)
        pidfds: list[int] = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, OSError):
                pidfds.append(os.pidfd_open(pid))
        for fd in pidfds:
            kill_pidfd(fd)
        if frozen:
            ctx.cgroups.set_frozen(cgroup, False)
        try:
            _wait_exited(pidfds, _KILL_TIMEOUT_S)
        finally:
            for fd in pidfds:
                os.close(fd)
        if record.init_pid is not None:
            reap_if_child(record.init_pid)
        if not ctx.cgroups.procs(cgroup):
            return True
    return False


def _runtime_calls(ctx: Context, record: SlotRecord) -> list[int]:
    """pidfds of runtime commands still making the slot's container (``run --bundle``)."""
    binary, bundle = os.fsencode(ctx.runtime.binary), os.fsencode(ctx.paths(record.slot).root)

    def making_it(pid: str) -> bool:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        at = argv.index(b"--bundle") + 1 if b"--bundle" in argv else 0
        return argv[0] == binary and 0 < at < len(argv) and argv[at] == bundle

    pidfds: list[int] = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if not making_it(pid):
            continue
        try:
            pidfd = os.pidfd_open(int(pid))
        except OSError:
            continue
        # Checked again once the pidfd pins the process: a reused pid is never signalled.
        if making_it(pid):
            pidfds.append(pidfd)
        else:
            os.close(pidfd)
    return pidfds


def _end_runtime_calls(ctx: Context, record: SlotRecord) -> None:
    """A server that died while the runtime was starting this slot left that command
    running; it would go on making the container behind the teardown. End it first."""
    pidfds = _runtime_calls(ctx, record)
    try:
        for fd in pidfds:
            # SECURITY: only the runtime's own command for this slot's bundle is killed.
            kill_pidfd(fd)
        _wait_exited(pidfds, _KILL_TIMEOUT_S)
    finally:
        for fd in pidfds:
            os.close(fd)


def _remove_files(ctx: Context, record: SlotRecord) -> None:
    paths = ctx.paths(record.slot)
    unmount_rootfs(paths)
    unmount_disk(paths)  # its loop device detaches with it
    trees = [paths.layer, paths.rootfs, paths.etc, paths.binds, paths.trace]
    if record.work_dir is not None:
        # SECURITY: a build slot's upper layer (the step's result) is never removed here;
        # only the overlay work directory made beside it.
        trees.append(Path(record.work_dir))
    remove_slot_state(paths, trees)
    # The runtime writes its pid file as ".init.pid" first, then renames it: a runtime
    # killed in between (a crashed server's) leaves that one.
    runtime_partial = paths.pid_file.with_name(f".{paths.pid_file.name}")
    for name in (paths.disk, paths.config, paths.envd_log, paths.runtime_log, paths.pid_file,
                 runtime_partial, paths.state.with_suffix(".tmp")):
        name.unlink(missing_ok=True)


def _release_names(ctx: Context, record: SlotRecord) -> None:
    if ctx.netns_stock is not None:
        ctx.netns_stock.drop(record.lease_index)  # taken from the stock, never joined
    ctx.addresses.release(record.lease_index, str(ctx.paths(record.slot).root))
    if record.sandbox_id and ctx.claimed_slot(record.sandbox_id) == record.slot:
        ctx.claim_path(record.sandbox_id).unlink(missing_ok=True)


async def stop_processes(ctx: Context, record: SlotRecord) -> None:
    """Kill everything in the slot and drop its runtime state and cgroups."""
    if not await asyncio.to_thread(kill_processes, ctx, record):
        raise CheckpointFailed(f"slot {record.slot}: processes survive SIGKILL")
    await ctx.runtime.delete(record.slot)
    busy = ctx.cgroups.remove(record.cgroup_path)
    if busy:
        raise CheckpointFailed(f"slot {record.slot}: cgroups still busy: {busy}")


async def detach_egress(ctx: Context, record: SlotRecord, owns_lease: bool) -> None:
    """Remove the sandbox's rules and resolver; only its saved policy file when the
    address lease (and so every name derived from it) is no longer this slot's."""
    root = ctx.paths(record.slot).root
    if owns_lease:
        await ctx.egress.detach(root, record.veth, record.host_address,
                                record.sandbox_address)
    else:
        ctx.egress.forget(root)


async def teardown(ctx: Context, record: SlotRecord) -> None:
    """Destroy the slot completely; raises only if something could not be removed."""
    if record.phase is SlotPhase.CREATING and record.init_pid is None:
        await asyncio.to_thread(_end_runtime_calls, ctx, record)
    if not await asyncio.to_thread(kill_processes, ctx, record):
        raise RuntimeError(f"slot {record.slot}: processes survive SIGKILL")
    with contextlib.suppress(Exception):
        await ctx.runtime.delete(record.slot)
    busy = ctx.cgroups.remove(record.cgroup_path)
    if busy:
        raise RuntimeError(f"slot {record.slot}: cgroups still busy: {busy}")
    owns_lease = ctx.addresses.owner(record.lease_index) == LeaseOwner(
        str(ctx.paths(record.slot).root), record.owner)

    async def network() -> None:
        # SECURITY: the names may belong to a newer sandbox once the lease is gone.
        await detach_egress(ctx, record, owns_lease)
        if owns_lease:
            await delete_veth(record.veth)

    # Both to the end, whichever fails; the first failure is raised after.
    done = await asyncio.gather(network(), asyncio.to_thread(_remove_files, ctx, record),
                                return_exceptions=True)
    for outcome in done:
        if isinstance(outcome, BaseException):
            raise outcome
    # SECURITY: the address (and every name made from it) is free only now.
    _release_names(ctx, record)
    paths = ctx.paths(record.slot)
    paths.state.unlink(missing_ok=True)
    # A record being written when a server died (repaired at the next start) left its
    # temporary file.
    await asyncio.to_thread(remove_partial_writes, paths.root)
    with contextlib.suppress(FileNotFoundError):
        paths.root.rmdir()
    _log.debug("slot %s (sandbox %s) torn down", record.slot, record.sandbox_id)


async def undo_after_failure(ctx: Context, record: SlotRecord) -> None:
    """Tear the slot down, to the end even if the caller is being cancelled."""
    try:
        await to_the_end(teardown(ctx, record))
    except Exception:
        _log.exception("teardown of failed slot %s left resources; recovery will retry",
                       record.slot)
