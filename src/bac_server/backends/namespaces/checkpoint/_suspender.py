"""``Suspender``: the pauses of the backend's sandboxes and their wakes.

Which pause is which (the control plane chooses, see docs/pause-and-checkpoints.md):

* freezer (``Pausable.pause``): processes stop in place, memory stays resident; <1 ms.
* suspend with memory: CRIU saves processes, memory, sockets and PTYs to the slot's
  directory and the processes end, freeing their memory; the files (overlay upper), the
  address and the network namespace stay. ``wake`` restores them with the same pids.
* suspend without memory: the processes end, the files stay; ``wake`` starts envd afresh.

A suspend reaches the disk in the background once the call returns (``_durable``), off
the pause's path; a wake sets the images aside and deletes them off its own
(``_discard``). The suspender works on the records of the backend's ``SlotTable`` under
its locks; the checkpointer restores through it (``restore_in_place``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path

from bac_server.backends.base import (
    CheckpointFailed,
    PauseKind,
    SandboxEndpoint,
    SandboxNotFound,
    SandboxSpec,
)
from bac_server.cancel_safe import off_loop

from ..slots import (
    Context,
    SlotPhase,
    SlotRecord,
    SlotTable,
    cold_start,
    ensure_flat_sysfs,
    ensure_in_place,
    restorable,
    save_record,
    stop_processes,
)
from ..volumes import rebind
from . import _discard, _stored
from ._durable import Flusher
from ._handover import Handover
from .criu import (
    Criu,
    Images,
    dump,
    ensure_kdat_dir,
    find_criu,
    freeze,
    freeze_all,
    images_bytes,
    make_ahead,
    release_suspend_lock,
    remove_images,
    restore,
    thaw,
    wake_ahead,
)

_log = logging.getLogger(__name__)


async def prepare_checkpoints(ctx: Context) -> Criu | None:
    """At start-up: what runc slots need, and the CRIU to use (None: memory cannot be
    saved on this host, files-only suspend still works)."""
    await off_loop(lambda: _stored.sweep_partial(ctx.config))
    await off_loop(lambda: _discard.sweep(ctx.config.data_dir))
    if not restorable(ctx.runtime):
        _log.info("runtime %s cannot checkpoint; pause keeps memory or files only",
                  ctx.runtime.name)
        return None
    await off_loop(ensure_flat_sysfs)
    await off_loop(ensure_kdat_dir)
    return await asyncio.to_thread(find_criu, ctx.config.criu)


def suspend_images(ctx: Context, record: SlotRecord) -> Images:
    root = ctx.paths(record.slot).root
    return Images(root / "suspend" / "images", root / "criu-work")


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.warning("deleting a resume's images failed (swept at the next start): %s",
                     task.exception())


def _flush_name(sandbox_id: str) -> str:
    return f"sandbox {sandbox_id}"


class Suspender:
    def __init__(self, slots: SlotTable, criu: Criu | None, flusher: Flusher,
                 tasks: set[asyncio.Future[None]], handover: Handover) -> None:
        # ``tasks``: where the backend keeps work that its close() waits for (bounded).
        self.criu = criu
        self._slots = slots
        self._ctx = slots.ctx
        self._flusher = flusher
        self._tasks = tasks
        self.handover = handover

    @property
    def memory_checkpoints(self) -> bool:
        return self.criu is not None

    def need_criu(self) -> Criu:
        if self.criu is None:
            raise CheckpointFailed("saving memory needs runc and CRIU >= 4.2 on this host "
                                   "(scripts/build-criu.sh); pause with memory=false instead")
        return self.criu

    async def reattached(self, records: Iterable[SlotRecord]) -> None:
        """At start-up: a re-attached sandbox that is not suspended to disk holds no TCP
        connections (a suspend cut short by a crash may have left a hold on them)."""
        for record in records:
            if record.paused_to is not PauseKind.DISK:
                try:
                    await release_suspend_lock(self._ctx, record)
                except CheckpointFailed:
                    _log.exception("slot %s: its TCP connections stay held", record.slot)

    def forget(self, record: SlotRecord) -> None:
        """The slot is torn down: what its suspend made ahead went with it."""
        wake_ahead.forget(record.slot)

    @contextlib.asynccontextmanager
    async def working(self, sandbox_id: str) -> AsyncIterator[None]:
        """The sandbox's lock, and background flushes held back meanwhile."""
        async with self._slots.lock(sandbox_id):
            with self._flusher.busy():
                yield

    # -- the freezer ----------------------------------------------------------------------

    async def pause(self, sandbox_id: str) -> None:
        ctx = self._ctx
        async with self._slots.lock(sandbox_id):
            record = self._slots.record(sandbox_id)
            if record.phase is SlotPhase.PAUSED:
                return
            # The cgroup freezer itself: a sandbox restored by CRIU is unknown to the runtime.
            await asyncio.to_thread(freeze, ctx, record)
            record.move(SlotPhase.PAUSED)
            record.paused_to = PauseKind.FREEZER
            save_record(ctx.paths(record.slot), record)

    async def pause_all(self, sandbox_ids: Sequence[str]) -> dict[str, str]:
        """The freezer on many sandboxes at once (each under its lock): every cgroup's
        freeze started, then all waited for together on the loop, with no thread per
        sandbox. Returns those not paused, with why."""
        ctx = self._ctx
        failed: dict[str, str] = {}
        async with contextlib.AsyncExitStack() as locks:
            by_slot: dict[str, tuple[str, SlotRecord]] = {}
            for sandbox_id in sandbox_ids:
                await locks.enter_async_context(self._slots.lock(sandbox_id))
                try:
                    record = self._slots.record(sandbox_id)
                except SandboxNotFound:
                    failed[sandbox_id] = "it is gone"
                    continue
                if record.phase is SlotPhase.RUNNING:
                    by_slot[record.slot] = (sandbox_id, record)
                elif record.phase is not SlotPhase.PAUSED:
                    failed[sandbox_id] = f"it is {record.phase.value}"
            stuck = await freeze_all(ctx, [r for _, r in by_slot.values()])
            for slot, why in stuck.items():
                failed[by_slot.pop(slot)[0]] = why
            frozen = [r for _, r in by_slot.values()]
            for record in frozen:
                record.move(SlotPhase.PAUSED)
                record.paused_to = PauseKind.FREEZER
            def save_all() -> None:
                for record in frozen:
                    save_record(ctx.paths(record.slot), record)

            await off_loop(save_all)  # the records in one thread call (a small file each)
        return failed

    async def resume(self, sandbox_id: str) -> SandboxEndpoint:
        ctx = self._ctx
        async with self._slots.lock(sandbox_id):
            record = self._slots.record(sandbox_id)
            if record.phase is SlotPhase.PAUSED and record.paused_to in (PauseKind.DISK,
                                                                         PauseKind.FILESYSTEM):
                raise CheckpointFailed(f"sandbox {sandbox_id} is suspended: wake() it")
            if record.phase is SlotPhase.PAUSED:
                thaw(ctx, record)
                record.move(SlotPhase.RUNNING)
                record.paused_to = None
                save_record(ctx.paths(record.slot), record)
        return SandboxEndpoint(sandbox_id, record.sandbox_address)

    # -- suspend / wake -------------------------------------------------------------------

    async def suspend(self, sandbox_id: str, *, memory: bool) -> int:
        ctx = self._ctx
        written = 0
        async with self.working(sandbox_id):
            record = self._slots.record(sandbox_id)
            if record.phase is SlotPhase.PAUSED and record.paused_to is not PauseKind.FREEZER:
                return 0
            if memory:
                criu = self.need_criu()
                where = suspend_images(ctx, record)
                remove_images(where)
                await off_loop(lambda: freeze(ctx, record))
                try:
                    meta = await dump(ctx, criu, record, where, leave_running=False)
                except BaseException:
                    thaw(ctx, record)
                    raise
                await stop_processes(ctx, record)  # runc left the cgroups: free them
                written = await off_loop(lambda: images_bytes(where.images))
                if meta is not None:  # images runc saved need nothing made ahead
                    await off_loop(lambda: make_ahead(ctx, record, where.images, meta))
            else:
                await stop_processes(ctx, record)
            if record.phase is not SlotPhase.PAUSED:
                record.move(SlotPhase.PAUSED)
            record.paused_to = PauseKind.DISK if memory else PauseKind.FILESYSTEM
            paths = ctx.paths(record.slot)
            await off_loop(lambda: save_record(paths, record))
            # The images, the record and the sandbox's files (the overlay's upper).
            self._flusher.request(_flush_name(sandbox_id), paths.root / "suspend",
                                  paths.root, paths.layer / "upper")
            # And for another node, when nodes share storage (``_handover``).
            self.handover.export(sandbox_id, record,
                                 suspend_images(ctx, record).images if memory else None)
        return written

    async def wake(self, spec: SandboxSpec, *, memory: bool = True) -> SandboxEndpoint:
        ctx = self._ctx
        async with self.working(spec.sandbox_id):
            record = self._slots.record(spec.sandbox_id)
            suspended = record.phase is SlotPhase.PAUSED and \
                record.paused_to is not PauseKind.FREEZER
            where = suspend_images(ctx, record)
            if record.phase is SlotPhase.PAUSED and record.paused_to is PauseKind.FREEZER:
                thaw(ctx, record)
            elif suspended:
                # Before anything runs: no other node may take this state over after.
                await self.handover.withdraw(spec.sandbox_id, record)
                if memory and record.paused_to is PauseKind.DISK:
                    await self.restore_in_place(record, where)
                else:
                    await release_suspend_lock(ctx, record)
                    await off_loop(lambda: wake_ahead.discard(
                        ctx.cgroups, ctx.paths(record.slot), record.slot, record.cgroup_path))
                    await cold_start(ctx, record, spec)
                    await rebind(ctx, record)  # a new config: its volumes bound again
                # The images are garbage now (on failure they stay, and get written).
                self.drop_flush(spec.sandbox_id)
            if record.phase is SlotPhase.PAUSED:
                record.move(SlotPhase.RUNNING)
            record.paused_to = None
            # Saved before the images go: a server stopped in between finds the sandbox
            # running (the next suspend replaces the images), never paused without them.
            await off_loop(lambda: save_record(ctx.paths(record.slot), record))
            if suspended:
                # Moved aside at once (the slot's paths are free for its next suspend).
                self._delete_later(_discard.set_aside(ctx.config.data_dir, where.images,
                                                      where.work))
            return SandboxEndpoint(spec.sandbox_id, record.sandbox_address)

    def drop_flush(self, sandbox_id: str) -> None:
        """The sandbox's suspend images are garbage: no point writing them to disk."""
        self._flusher.drop(_flush_name(sandbox_id))

    async def flushed(self, sandbox_id: str) -> None:
        """Wait until the sandbox's last suspend is on disk (at once if it is, or if a
        wake made writing it pointless)."""
        await self._flusher.flushed(_flush_name(sandbox_id))

    def flushing(self, sandbox_id: str) -> bool:
        """Whether the sandbox's last suspend is still to be written to disk."""
        return self._flusher.pending(_flush_name(sandbox_id))

    def _delete_later(self, garbage: list[Path]) -> None:
        """Delete a resume's images off its path, after its record is saved: unlinking
        them frees their blocks, and that journal work made the record's rename wait
        2-3 ms."""
        if garbage:
            task = asyncio.ensure_future(off_loop(lambda: _discard.delete(garbage)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(_log_failure)

    async def restore_in_place(self, record: SlotRecord, where: Images) -> None:
        """Restore the slot's processes from ``where`` into the slot itself (a wake, a
        roll-back); on failure its processes are stopped."""
        ctx = self._ctx
        criu = self.need_criu()
        await ensure_in_place(ctx, record)
        try:
            await restore(ctx, criu, record, where)
        except CheckpointFailed:
            await stop_processes(ctx, record)
            raise
        if ctx.cgroups.is_frozen(record.cgroup_path):
            thaw(ctx, record)  # dumped from a frozen cgroup: CRIU brings it back frozen
