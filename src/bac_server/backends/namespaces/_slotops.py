"""Steps on an existing slot that suspending, waking and restoring are made of.

* ``stop_processes``: every process gone, runtime state and cgroups removed (memory freed);
  files, mount, network and address stay.
* ``ensure_in_place``: after a host reboot the overlay mount and the pinned network
  namespace are gone; put them back (a new address lease if the old one was lost).
* ``replace_upper``: roll the sandbox's files back to a checkpoint's copy.
* ``cold_start``: start envd afresh in the slot and initialise it (files-only resume).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from bac_server.backends.base import CheckpointFailed, SandboxSpec
from bac_server.backends.envd_http import init_payload, post_init
from bac_server.host import is_mount_point, remove_tree

from ._context import Context
from ._launch import _note_init, _write_config, off_loop, sandbox_env
from ._layers import mount_rootfs, unmount_rootfs
from ._ocispec import Limits, SandboxPlan
from ._restorable import netns_pinned, pin_netns, restorable
from ._slot import SlotRecord, save_record
from ._teardown import _kill_slot_processes
from .envd import wait_ready
from .layers import copy_tree
from .network import LeaseOwner, create_netns


def limits_of(ctx: Context, record: SlotRecord) -> Limits:
    return Limits(vcpus=record.vcpus, memory_mb=record.memory_mb, pids_max=record.pids_max,
                  limit_swap=ctx.cgroups.supports_swap)


async def stop_processes(ctx: Context, record: SlotRecord) -> None:
    """Kill everything in the slot and drop its runtime state and cgroups."""
    if not await asyncio.to_thread(_kill_slot_processes, ctx, record):
        raise CheckpointFailed(f"slot {record.slot}: processes survive SIGKILL")
    await ctx.runtime.delete(record.slot)
    busy = ctx.cgroups.remove(record.cgroup_path)
    if busy:
        raise CheckpointFailed(f"slot {record.slot}: cgroups still busy: {busy}")


async def ensure_in_place(ctx: Context, record: SlotRecord) -> tuple[str, int | None]:
    """Mount and network of a slot whose processes are gone: the netns path, and an fd
    holding the namespace that the caller closes once the runtime has joined it."""
    paths = ctx.paths(record.slot)
    if not is_mount_point(paths.rootfs):
        await off_loop(lambda: mount_rootfs(paths, record.layer_stack))
    if restorable(ctx.runtime) and netns_pinned(paths):
        return str(paths.root / "netns"), None
    owner = LeaseOwner(str(paths.root), record.owner)
    if ctx.addresses.owner(record.lease_index) != owner:
        # The lease directory did not survive (a reboot): take an address again.
        lease = ctx.addresses.lease(LeaseOwner(str(paths.root), ctx.owner))
        record.lease_index, record.veth = lease.index, lease.veth
        record.host_address, record.sandbox_address = lease.host_address, lease.sandbox_address
        record.owner = ctx.owner
        save_record(paths, record)
    lease = ctx.addresses.describe(record.lease_index)
    netns_fd = await create_netns(lease)
    if restorable(ctx.runtime):
        try:
            return pin_netns(paths, netns_fd), None
        finally:
            os.close(netns_fd)
    return f"/proc/{os.getpid()}/fd/{netns_fd}", netns_fd


async def replace_upper(ctx: Context, record: SlotRecord, source: Path) -> None:
    """Give the (stopped) slot the files of ``source``: overlay off, layer swapped, on."""
    paths = ctx.paths(record.slot)
    upper, work = paths.layer / "upper", paths.layer / "work"
    await off_loop(lambda: unmount_rootfs(paths))
    fresh = paths.layer / "upper.new"
    await off_loop(lambda: remove_tree(fresh))
    fresh.mkdir(mode=0o755)
    await copy_tree(source, fresh)

    def swap() -> None:
        remove_tree(upper)
        os.replace(fresh, upper)
        # overlayfs keeps in-flight state in work/: a clean one for the new upper.
        remove_tree(work)
        work.mkdir(mode=0o700)
        mount_rootfs(paths, record.layer_stack)

    await off_loop(swap)


async def cold_start(ctx: Context, record: SlotRecord, spec: SandboxSpec) -> None:
    """Start envd in the stopped slot on its current files and initialise it."""
    paths = ctx.paths(record.slot)
    netns, held = await ensure_in_place(ctx, record)
    plan = SandboxPlan(
        hostname=spec.sandbox_id, rootfs=paths.rootfs, netns_path=netns,
        cgroup_path=record.cgroup_path, id_range=ctx.config.id_range,
        limits=limits_of(ctx, record), allow_setuid=spec.template.allow_setuid,
        envd_bundle=Path(record.envd_bundle), etc_dir=paths.etc,
        recursive_sys=ctx.runtime.name != "crun")
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        try:
            await off_loop(lambda: _write_config(paths, plan, False, ctx.runtime))
            await ctx.runtime.run_detached(paths.root, record.slot, ready_fd=write_fd,
                                           stdio=paths.envd_log, log=paths.runtime_log,
                                           pid_file=paths.pid_file)
        finally:
            os.close(write_fd)
            if held is not None:
                os.close(held)  # the sandbox's processes hold the namespace now
        await off_loop(lambda: _note_init(paths, record))
        await wait_ready(read_fd, ctx.config.envd_start_timeout_s)
    finally:
        os.close(read_fd)
    payload = init_payload(sandbox_env(spec), spec.envd_access_token,
                           spec.template.default_user, spec.template.default_workdir)
    await post_init(record.sandbox_address, payload, ctx.config.envd_init_timeout_s)
