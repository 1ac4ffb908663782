"""``Checkpointer``: checkpoints of the backend's sandboxes, roll-backs and copies, on top
of the suspender's restore (``_suspender``).

A checkpoint is taken from a frozen sandbox (files copied and memory dumped at the same
instant) that then continues; ``restore`` rolls a sandbox back to one, ``create_from``
starts a new sandbox from one in a slot of its own (own id, address, network namespace,
cgroup): the copy's established connections are restored closed, since nobody is at the
other end of them, and its hostname and envd token are set to its own. ``copy_ahead``
restores one for the ready pool, to be handed out later, and ``intact`` tells a
checkpoint no restore can succeed from (gone, images cut short) from one that failed
once. A checkpoint reaches the disk in the background once published (``_durable``).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from bac_server.backends.base import (
    CheckpointFailed,
    CheckpointInfo,
    CheckpointNotFound,
    PauseKind,
    SandboxEndpoint,
    SandboxSpec,
    TemplateImage,
)
from bac_server.backends.egress import EgressPolicy
from bac_server.cancel_safe import off_loop
from bac_server.host import remove_tree, write_private

from ..layers import copy_tree
from ..slots import (
    Limits,
    SlotPhase,
    SlotRecord,
    SlotTable,
    cold_start,
    ensure_in_place,
    replace_upper,
    save_record,
    stop_processes,
)
from ..volumes import rebind
from . import _stored
from ._copies import layout_of, restore_copy, start_copy, template_of
from ._durable import Flusher
from ._seeded import seeded_disk
from ._suspender import Suspender, suspend_images
from .criu import (
    Images,
    check_images,
    dump,
    freeze,
    release_suspend_lock,
    remove_images,
    thaw,
)


def _flush_name(checkpoint_id: str) -> str:
    return f"checkpoint {checkpoint_id}"


class Checkpointer:
    def __init__(self, slots: SlotTable, suspender: Suspender, flusher: Flusher) -> None:
        self._slots = slots
        self._ctx = slots.ctx
        self._suspender = suspender
        self._flusher = flusher

    @property
    def memory_checkpoints(self) -> bool:
        """Whether this host can save and restore a sandbox's memory (CRIU found)."""
        return self._suspender.memory_checkpoints

    async def checkpoint(self, sandbox_id: str, checkpoint_id: str, *,
                         memory: bool) -> CheckpointInfo:
        ctx = self._ctx
        criu = self._suspender.need_criu() if memory else None
        async with self._suspender.working(sandbox_id):
            record = self._slots.record(sandbox_id)
            if record.phase is not SlotPhase.RUNNING and record.paused_to is not PauseKind.FREEZER:
                raise CheckpointFailed(f"sandbox {sandbox_id} is suspended; resume it to "
                                       "take a checkpoint")
            paths = ctx.paths(record.slot)
            try:
                work = await off_loop(lambda: _stored.partial(ctx.config, checkpoint_id))
            except FileExistsError as exc:
                raise CheckpointFailed(str(exc)) from exc
            froze = await off_loop(lambda: freeze(ctx, record))
            try:
                await copy_tree(paths.layer / "upper", work.upper)
                if criu is not None:
                    await dump(ctx, criu, record, work.dump, leave_running=True)
                await off_loop(lambda: write_private(work.config, paths.config.read_bytes()))
            except BaseException:
                await off_loop(lambda: remove_tree(work.path))
                raise
            finally:
                if froze:
                    thaw(ctx, record)
            meta = _stored.Meta(
                checkpoint_id=checkpoint_id, sandbox_id=sandbox_id, created_at=time.time(),
                memory=memory, size_bytes=0, template_id=record.template_id,
                template_rootfs=record.template_rootfs, envd_bundle=record.envd_bundle,
                layers=tuple(str(p) for p in record.layer_stack))
            meta = await off_loop(lambda: _stored.finish(ctx.config, work, meta))
            self._flusher.request(_flush_name(checkpoint_id),
                                  _stored.root(ctx.config) / checkpoint_id)
            return meta.info()

    async def flushed(self, checkpoint_id: str) -> None:
        """Wait until the checkpoint is on disk (at once if it is)."""
        await self._flusher.flushed(_flush_name(checkpoint_id))

    async def restore(self, spec: SandboxSpec, checkpoint_id: str) -> SandboxEndpoint:
        ctx = self._ctx
        stored = await off_loop(lambda: _stored.find(ctx.config, checkpoint_id))
        meta = stored.meta()
        async with self._suspender.working(spec.sandbox_id):
            record = self._slots.record(spec.sandbox_id)
            await self._suspender.handover.withdraw(spec.sandbox_id, record)
            self._suspender.drop_flush(spec.sandbox_id)
            await stop_processes(ctx, record)
            await release_suspend_lock(ctx, record)
            remove_images(suspend_images(ctx, record))
            await ensure_in_place(ctx, record)
            await replace_upper(ctx.paths(record.slot), record.layer_stack, stored.upper)
            if meta.memory:
                # CRIU's logs go to the slot: the checkpoint itself is never written.
                where = Images(stored.dump.images, ctx.paths(record.slot).root / "criu-work")
                await self._suspender.restore_in_place(record, where)
            else:
                await cold_start(ctx, record, spec)
                await rebind(ctx, record)  # a new config: its volumes bound again
            if record.phase is SlotPhase.PAUSED:
                record.move(SlotPhase.RUNNING)
            record.paused_to = None
            await off_loop(lambda: save_record(ctx.paths(record.slot), record))
            return SandboxEndpoint(spec.sandbox_id, record.sandbox_address)

    async def create_from(self, spec: SandboxSpec, checkpoint_id: str, *,
                          source_token: str | None) -> SandboxEndpoint:
        return await self._slots.start(
            spec.sandbox_id, lambda: self.copy(spec, checkpoint_id, source_token=source_token))

    async def take_over(self, spec: SandboxSpec, *, memory: bool) -> SandboxEndpoint:
        """Start here the suspended sandbox ``spec`` that another node exported to the
        shared storage (``_handover``), as its wake there would have: with its memory
        unless ``memory`` is False (then afresh on its files), its address this node's,
        its connections to the outside closed. ``CheckpointNotFound``: no complete
        export of it is there."""
        return await self._slots.start(spec.sandbox_id,
                                       lambda: self._taken_over(spec, memory=memory))

    async def _taken_over(self, spec: SandboxSpec, *, memory: bool) -> SlotRecord:
        ctx = self._ctx
        async with self._suspender.handover.take(spec.sandbox_id) as stored:
            meta = await off_loop(stored.meta)
            template = template_of(meta, spec.template)
            bundle = await ctx.envd_bundle(template)
            memory = meta.memory and memory
            if memory and bundle.name != Path(meta.envd_bundle).name:
                # The restored envd maps its bundle's files: they must be the same.
                raise CheckpointFailed(
                    f"sandbox {spec.sandbox_id} ran envd bundle {Path(meta.envd_bundle).name}"
                    f", this node has {bundle.name} (another Bac version): it can only be "
                    "woken without its memory here")
            meta = dataclasses.replace(meta, envd_bundle=str(bundle), memory=memory)
            criu = self._suspender.need_criu() if meta.memory else None
            with self._flusher.busy():
                return await start_copy(ctx, criu, stored, meta, spec,
                                        source_token=spec.envd_access_token)

    async def copy(self, spec: SandboxSpec, checkpoint_id: str, *,
                   source_token: str | None, often: bool = False) -> SlotRecord:
        """The slot of a new sandbox ``spec`` continuing from the checkpoint, RUNNING; the
        caller has claimed ``spec.sandbox_id`` (``SlotTable.start``). ``often``: the
        checkpoint is copied for many creates (a template's start snapshot), so its
        files are laid once into a disk image that every copy starts from."""
        ctx = self._ctx
        stored = await off_loop(lambda: _stored.find(ctx.config, checkpoint_id))
        meta = stored.meta()
        criu = self._suspender.need_criu() if meta.memory else None
        with self._flusher.busy():
            return await start_copy(ctx, criu, stored, meta, spec, source_token=source_token,
                                    seed=often)

    async def copy_ahead(self, checkpoint_id: str, image: TemplateImage, limits: Limits, *,
                         hostname: str, disk_mb: int) -> SlotRecord:
        """A slot restored from the memory checkpoint for no sandbox yet (CREATING, for the
        ready pool to finish): envd keeps the checkpoint's token until ``assign``. Its
        memory is restored whole (as every copy of a start snapshot's: ``start_copy``)."""
        ctx = self._ctx
        stored = await off_loop(lambda: _stored.find(ctx.config, checkpoint_id))
        meta = stored.meta()
        if not meta.memory:
            raise CheckpointFailed(f"checkpoint {checkpoint_id} holds no memory to restore")
        criu = self._suspender.need_criu()
        with self._flusher.busy():
            seeded = await seeded_disk(ctx.config, stored, disk_mb)
            return await restore_copy(ctx, criu, stored, meta, template_of(meta, image),
                                      limits, hostname=hostname, disk_mb=disk_mb,
                                      egress=EgressPolicy(), seeded=seeded, lazy=False)

    async def stock(self, checkpoint_id: str, image: TemplateImage, disk_mb: int) -> None:
        """Have slots laid out ahead for copies of the memory checkpoint (a start snapshot
        just taken) on disks of ``disk_mb``: its seeded disk image filled and its layout
        wanted by the slot stock, if there is one."""
        ctx = self._ctx
        if ctx.slot_stock is None:
            return
        stored = await off_loop(lambda: _stored.find(ctx.config, checkpoint_id))
        meta = stored.meta()
        if not meta.memory:
            return
        with self._flusher.busy():
            seeded = await seeded_disk(ctx.config, stored, disk_mb)
        ctx.slot_stock.want(layout_of(meta, template_of(meta, image), disk_mb, seeded))

    async def intact(self, checkpoint_id: str) -> bool:
        """Whether the checkpoint is there and, as far as its files tell, restorable: no
        restore of one that is not can succeed (a restore may still fail for other
        reasons, such as memory)."""
        ctx = self._ctx

        def check() -> bool:
            try:
                stored = _stored.find(ctx.config, checkpoint_id)
                if stored.meta().memory:
                    check_images(stored.dump.images)
            except (CheckpointNotFound, CheckpointFailed, OSError):
                return False
            return True

        return await off_loop(check)

    async def delete(self, checkpoint_id: str) -> None:
        ctx = self._ctx
        await off_loop(lambda: _stored.delete(ctx.config, checkpoint_id))
