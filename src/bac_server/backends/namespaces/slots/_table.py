"""``SlotTable``: the backend's live sandboxes, each a slot record bound to a sandbox id.

The table holds the records of the sandboxes running or paused on this host (re-attached
at start-up, added by a create), a lock per sandbox for the operations that change one,
and the claims (one file per sandbox id, made with ``O_EXCL``) that keep two creates of
one id apart, across processes too. A slot enters the table through ``start`` (a
hand-out from the ready pool, a cold start, a copy of a checkpoint) and leaves it through
``destroy``; the suspender and the checkpointer work on the records it holds, under its
locks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable, Callable

from bac_server.backends.base import (
    PauseKind,
    ResourceUsage,
    SandboxEndpoint,
    SandboxNotFound,
    SandboxSetupError,
    SandboxSpec,
    SandboxStatus,
)
from bac_server.cancel_safe import to_the_end

from ._context import Context
from ._launch import boot
from ._process import is_alive
from ._record import SlotPhase, SlotRecord, save_record
from ._recovery import PENDING_CLAIM
from ._teardown import teardown
from ._trace import TraceSockets
from ._usage import UsageSampler
from ._validate import validate


class SlotTable:
    def __init__(self, ctx: Context, records: dict[str, SlotRecord],
                 tasks: set[asyncio.Future[None]]) -> None:
        # ``tasks``: where the backend keeps work that its close() waits for (bounded).
        self.ctx = ctx
        self._records = records
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks = tasks
        self._usage = UsageSampler()
        self.traces = TraceSockets(ctx.config.id_range, self._sandbox_in,
                                   ctx.config.ca_certificates)

    def _sandbox_in(self, slot: str) -> str | None:
        for sandbox_id, record in self._records.items():
            if record.slot == slot:
                return sandbox_id
        return None

    async def open_traces(self) -> None:
        """The trace sockets of the sandboxes re-attached at start-up."""
        for record in list(self._records.values()):
            await self.traces.open(record.slot, self.ctx.paths(record.slot))

    def record(self, sandbox_id: str) -> SlotRecord:
        record = self._records.get(sandbox_id)
        if record is None:
            raise SandboxNotFound(f"sandbox {sandbox_id} not found")
        return record

    def lock(self, sandbox_id: str) -> asyncio.Lock:
        return self._locks.setdefault(sandbox_id, asyncio.Lock())

    def ids(self) -> list[str]:
        return sorted(self._records)

    def endpoint(self, sandbox_id: str) -> SandboxEndpoint:
        return SandboxEndpoint(sandbox_id, self.record(sandbox_id).sandbox_address)

    def _claim(self, sandbox_id: str) -> None:
        try:
            fd = os.open(self.ctx.claim_path(sandbox_id),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError as exc:
            raise SandboxSetupError(f"sandbox {sandbox_id} already exists") from exc
        with os.fdopen(fd, "w") as handle:
            handle.write(PENDING_CLAIM + self.ctx.owner)

    async def start(self, sandbox_id: str,
                    make: Callable[[], Awaitable[SlotRecord]]) -> SandboxEndpoint:
        """Claim ``sandbox_id``, make its slot with ``make`` (which fails closed) and hold
        it; the claim goes again when making fails."""
        self._claim(sandbox_id)
        try:
            record = await make()
        except BaseException:
            self.ctx.claim_path(sandbox_id).unlink(missing_ok=True)
            raise
        self._records[sandbox_id] = record
        await self.traces.open(record.slot, self.ctx.paths(record.slot))
        return SandboxEndpoint(sandbox_id, record.sandbox_address)

    async def boot(self, spec: SandboxSpec, *, background: bool = False) -> SandboxEndpoint:
        """A sandbox started cold for ``spec``, never from the pool (a start snapshot's);
        ``background``: at a low CPU weight, so the sandboxes people wait on go first."""
        limits = validate(self.ctx.config, spec, self.ctx.cgroups.supports_swap)
        if background:
            limits = dataclasses.replace(limits, background=True)
        return await self.start(spec.sandbox_id, lambda: boot(self.ctx, spec, limits))

    async def destroy(self, sandbox_id: str) -> SlotRecord | None:
        """Tear the sandbox's slot down (idempotent); returns the record of the slot that
        went, None when there was none."""
        ctx = self.ctx
        async with self.lock(sandbox_id):
            record = self._records.get(sandbox_id)
            if record is None:
                slot = ctx.claimed_slot(sandbox_id)
                record = ctx.load(slot) if slot and not slot.startswith(PENDING_CLAIM) else None
            if record is None:
                return None
            if record.phase is not SlotPhase.DESTROYING:
                record.move(SlotPhase.DESTROYING)
                save_record(ctx.paths(record.slot), record)
            # Nothing it reports from here on is attributed to it.
            self.traces.close(record.slot, ctx.paths(record.slot))
            # To the end even if the caller is cancelled (an expiry at shutdown); close()
            # waits for it, so a stop never leaves a sandbox half torn down.
            task = asyncio.ensure_future(teardown(ctx, record))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            try:
                await to_the_end(task)
            finally:
                if task.done() and not task.cancelled() and task.exception() is None:
                    self._records.pop(sandbox_id, None)
                    self._usage.forget(sandbox_id)
        self._locks.pop(sandbox_id, None)
        return record

    def status(self, sandbox_id: str) -> SandboxStatus:
        record = self.record(sandbox_id)
        if record.phase is SlotPhase.PAUSED and record.paused_to in (PauseKind.DISK,
                                                                     PauseKind.FILESYSTEM):
            return SandboxStatus.PAUSED  # its processes are on disk or gone by design
        if not is_alive(record.init_pid, record.init_start):
            return SandboxStatus.STOPPED
        if record.phase is SlotPhase.PAUSED or self.ctx.cgroups.is_frozen(record.cgroup_path):
            return SandboxStatus.PAUSED
        return SandboxStatus.RUNNING

    def cpu_seconds(self, sandbox_id: str) -> float | None:
        record = self._records.get(sandbox_id)
        if record is None:
            return None
        try:
            return self.ctx.cgroups.cpu_usage_ns(record.cgroup_path) / 1e9
        except (FileNotFoundError, ValueError):
            return None

    async def usage(self, sandbox_id: str) -> ResourceUsage:
        return await self._usage.sample(self.ctx, sandbox_id, self.record(sandbox_id))
