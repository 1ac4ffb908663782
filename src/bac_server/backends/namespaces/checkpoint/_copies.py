"""A new sandbox continuing from a checkpoint (snapshots, forks), in a slot of its own.

What a CRIU restore of a *copy* needs, besides the images:

* the same files under the same paths: a fresh slot whose overlay upper is a copy of the
  checkpoint's (CRIU checks the size of every file a process holds open);
* its own network namespace and address: the copy's listening sockets are re-bound there
  (servers listen on 0.0.0.0), its established connections are restored closed (their
  peers talk to the original), and its envd is re-initialised with its own token;
* its own cgroup, hostname and /etc files: runc restores into the cgroup and bind sources
  its config names, so the checkpoint's config is rewritten for the new slot; the UTS
  namespace comes back with the original's hostname and is renamed after the restore.

A files-only checkpoint is simpler: a slot is started as usual, stopped, given the files
and started again.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from bac_server.backends.base import SandboxSetupError, SandboxSpec, TemplateImage
from bac_server.backends.egress import EgressPolicy
from bac_server.cancel_safe import off_loop, to_the_end
from bac_server.host import write_private

from ..slots import (
    ENVD_MOUNT,
    Context,
    Layout,
    Limits,
    SlotRecord,
    assign,
    attach_egress,
    cold_start,
    lay_out,
    lay_out_with_netns,
    netns_pin,
    new_record,
    pin_netns,
    replace_upper,
    set_hostname_in,
    start_slot,
    stop_processes,
    undo_after_failure,
    validate,
    write_identity,
)
from ._seeded import seeded_disk
from ._stored import Meta, Stored
from .criu import Criu, Images, restore, thaw


def _config_for_slot(config: dict[str, Any], *, slot_root: Path, netns: str,
                    cgroup_path: str, hostname: str, resources: dict[str, Any],
                    envd_bundle: str) -> None:
    """Point a config taken from another slot (a checkpoint's) at this slot: every path
    inside the other slot's directory (rootfs, the files bound over /etc) moves here, and
    envd's bundle is this host's (the same bundle, under this data dir: a sandbox taken
    over from another node)."""
    old_root = Path(config["root"]["path"]).parent

    def moved(path: str) -> str:
        found = Path(path)
        if found.is_relative_to(old_root):
            return str(slot_root / found.relative_to(old_root))
        return path

    config["root"]["path"] = moved(config["root"]["path"])
    config["hostname"] = hostname
    for entry in config["mounts"]:
        entry["source"] = moved(entry["source"])
        if entry.get("destination") == ENVD_MOUNT:
            entry["source"] = envd_bundle
    linux = config["linux"]
    for ns in linux["namespaces"]:
        if ns["type"] == "network":
            ns["path"] = netns
    linux["cgroupsPath"] = cgroup_path
    linux["resources"] = {**linux["resources"], **resources}


async def start_copy(ctx: Context, criu: Criu | None, stored: Stored, meta: Meta,
                     spec: SandboxSpec, *, source_token: str | None,
                     seed: bool = False) -> SlotRecord:
    """The new slot, RUNNING and initialised for ``spec``; fails closed (everything made
    is torn down and ``SandboxSetupError`` raised). ``seed``: the checkpoint is copied
    often (a start snapshot): its files go to the copy in a disk image filled once
    (``_seeded``), and its memory is restored whole before it runs (its first calls touch
    nearly all of it: paging it in lazily would make them wait on page faults)."""
    limits = validate(ctx.config, spec, ctx.cgroups.supports_swap)
    template = template_of(meta, spec.template)
    if not meta.memory:
        record = await start_slot(ctx, template, hostname=spec.sandbox_id, limits=limits,
                                  disk_mb=spec.disk_mb, pooled=False, preload=False)
        try:
            await stop_processes(ctx, record)
            await replace_upper(ctx.paths(record.slot), record.layer_stack, stored.upper)
            await cold_start(ctx, record, spec)
        except BaseException as exc:
            await undo_after_failure(ctx, record)
            raise SandboxSetupError(f"starting from checkpoint {meta.checkpoint_id}: {exc}") \
                from exc
        await assign(ctx, record, spec, limits)
        return record
    assert criu is not None  # a checkpoint with memory needs CRIU (create_from)
    seeded = await seeded_disk(ctx.config, stored, spec.disk_mb) if seed else None
    record = await restore_copy(ctx, criu, stored, meta, template, limits,
                                hostname=spec.sandbox_id, disk_mb=spec.disk_mb,
                                egress=spec.network, seeded=seeded, lazy=not seed)
    await assign(ctx, record, spec, limits, current_token=source_token,
                 egress_attached=True)
    return record


def template_of(meta: Meta, image: TemplateImage) -> TemplateImage:
    """The image a copy of ``meta``'s checkpoint runs: the checkpoint's layers, with the
    user, working directory, setuid policy and environment ``image`` gives."""
    return TemplateImage(meta.template_id, Path(meta.template_rootfs), image.default_user,
                         image.default_workdir, image.allow_setuid, lowers=meta.lowers,
                         env=image.env)


def layout_of(meta: Meta, template: TemplateImage, disk_mb: int, seeded: Path) -> Layout:
    """The layout of the slots copies of ``meta``'s checkpoint start in (``SlotStock``):
    ``template`` is ``template_of`` the checkpoint, ``seeded`` its disk image."""
    return Layout(meta.checkpoint_id, meta.template_id, template.layer_stack,
                  meta.envd_bundle, disk_mb, seeded)


async def restore_copy(ctx: Context, criu: Criu, stored: Stored, meta: Meta,
                       template: TemplateImage, limits: Limits, *, hostname: str,
                       disk_mb: int, egress: EgressPolicy,
                       seeded: Path | None = None, lazy: bool = True) -> SlotRecord:
    """A new slot restored from the memory checkpoint: its processes running under
    ``hostname`` on a disk of ``disk_mb``, envd still holding the checkpoint's token, the
    slot CREATING (for ``assign``, or the pool); fails closed (``SandboxSetupError``).

    The slot's egress policy ``egress`` goes in while CRIU restores (its veth rejects
    everything until then), so the restored processes run under it from their first
    instruction and the create does not wait for it after. ``seeded``: the image of the
    slot's disk already holding the checkpoint's files (``_seeded``); without it they are
    copied into the new disk, and with it a slot laid out ahead may serve (``SlotStock``).
    ``lazy``: its memory may come back lazily (``criu.restore``)."""
    layout = None if seeded is None or ctx.slot_stock is None else \
        layout_of(meta, template, disk_mb, seeded)
    record = _stocked(ctx, layout, limits)
    stocked = record is not None
    if record is None:
        record = new_record(ctx, kind="s", template_id=meta.template_id,
                            layers=template.layer_stack, envd_bundle=meta.envd_bundle,
                            limits=limits, disk_mb=disk_mb)
    paths = ctx.paths(record.slot)
    attaching: asyncio.Future[None] | None = None
    try:
        if stocked:
            netns = str(netns_pin(paths))
        else:
            made = await lay_out_with_netns(ctx, record, lambda: lay_out(
                ctx, record, template.layer_stack, hostname, seeded=seeded))
            try:
                netns = pin_netns(paths, made)
            finally:
                os.close(made)
        attaching = asyncio.ensure_future(attach_egress(ctx, record, egress))
        if seeded is None:
            await replace_upper(ctx.paths(record.slot), record.layer_stack, stored.upper)
        config = stored.oci_config()
        _config_for_slot(config, slot_root=paths.root, netns=netns,
                        cgroup_path=record.cgroup_path, hostname=hostname,
                        resources=limits.resources(), envd_bundle=record.envd_bundle)

        def write() -> None:
            write_private(paths.config, json.dumps(config))
            if stocked:  # laid out under a placeholder
                write_identity(paths, hostname, ctx.config.id_range)

        await off_loop(write)
        await restore(ctx, criu, record, Images(stored.dump.images, paths.root / "criu-work"),
                      lazy=lazy)
        if ctx.cgroups.is_frozen(record.cgroup_path):
            thaw(ctx, record)
        assert record.init_pid is not None
        pid = record.init_pid
        await off_loop(lambda: set_hostname_in(pid, hostname))
        await to_the_end(attaching)
    except BaseException as exc:
        if attaching is not None:
            # The teardown below detaches the policy: never while it is still going in.
            await asyncio.gather(to_the_end(attaching), return_exceptions=True)
        await undo_after_failure(ctx, record)
        if not isinstance(exc, Exception):
            raise
        raise SandboxSetupError(f"starting from checkpoint {meta.checkpoint_id}: {exc}") \
            from exc
    finally:
        if layout is not None and ctx.slot_stock is not None:
            ctx.slot_stock.want(layout)
    return record


def _stocked(ctx: Context, layout: Layout | None, limits: Limits) -> SlotRecord | None:
    """A slot of ``layout`` laid out ahead (``SlotStock``), given ``limits``; None when
    the stock has none."""
    if layout is None or ctx.slot_stock is None:
        return None
    record = ctx.slot_stock.take(layout)
    if record is not None:
        record.vcpus, record.memory_mb, record.pids_max = \
            limits.vcpus, limits.memory_mb, limits.pids_max
        record.created_at = time.time()
    return record
