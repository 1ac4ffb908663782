"""Checkpoints of a sandbox: take (on demand or on a schedule), list, restore, delete.

A checkpoint is the sandbox's state at one moment (files, and processes with their memory
when ``memory``), kept on disk by the backend and recorded in the store with its size. A
sandbox's checkpoints form its timeline and end with it; snapshots (:mod:`._snapshots`) are
the same thing kept beyond it. All of a team's checkpoints count against its disk quota:
one that would exceed it is refused (or deleted right after it was taken, when only then
its size is known) with ``QuotaExceeded``, and the sandbox keeps running either way.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from bac_server.backends.base import (
    Backend,
    Checkpointable,
    CheckpointFailed,
    CheckpointNotFound,
    PauseKind,
)
from bac_server.store import CheckpointKind, CheckpointRecord, CheckpointStore, SandboxStore

from ..clock import sleep
from ..errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    NotSupported,
    QuotaExceeded,
)
from ..keys import Team
from ..limits import Limits
from ..sandboxes import (
    EventKind,
    Lifecycle,
    LiveSandbox,
    Registry,
    SandboxState,
    event,
    spec_of,
)
from ..templates import TemplateSource
from ..tokens import new_checkpoint_id

log = logging.getLogger(__name__)


class Checkpoints:
    def __init__(self, *, backend: Backend, checkpoint_store: CheckpointStore,
                 sandbox_store: SandboxStore, registry: Registry, lifecycle: Lifecycle,
                 limits: Limits, templates: TemplateSource) -> None:
        self._backend = backend
        self._checkpoint_store = checkpoint_store
        self._sandbox_store = sandbox_store
        self._registry = registry
        self._lifecycle = lifecycle
        self._limits = limits
        self._templates = templates
        self._schedules: dict[str, asyncio.Task[None]] = {}
        self._intervals: dict[str, int] = {}  # what each running schedule was started with
        lifecycle.on_end.append(self._forget)
        lifecycle.on_followed.append(self._follow)

    def _checkpointable(self) -> Checkpointable:
        if not isinstance(self._backend, Checkpointable):
            raise NotSupported(f"the {self._backend.name!r} backend cannot take checkpoints")
        return self._backend

    async def take(self, team: Team, sandbox_id: str, *, name: str | None = None,
                   memory: bool = True, kind: CheckpointKind = CheckpointKind.CHECKPOINT,
                   scheduled: bool = False) -> CheckpointRecord:
        """Save the running sandbox's state; it keeps running. A ``scheduled`` one is not
        the sandbox's activity (its idle policy does not see it)."""
        backend = self._checkpointable()
        if memory and not backend.memory_checkpoints:
            raise NotSupported("this host cannot save memory (no CRIU); use memory=false")
        sbx = self._registry.owned(team, sandbox_id, activity=not scheduled)
        quota = self._limits.max_checkpoint_bytes_per_team
        used = await self._checkpoint_store.checkpoint_bytes(team.team_id)
        if quota and used >= quota:
            raise QuotaExceeded(f"the team's checkpoints use {used} bytes of its {quota}-byte "
                                "quota; delete some first")
        async with sbx.lock:
            self._registry.owned(team, sandbox_id, activity=not scheduled)
            if sbx.state is not SandboxState.RUNNING and sbx.paused_as is not PauseKind.FREEZER:
                raise Conflict(f"sandbox {sandbox_id!r} is paused; resume it first")
            checkpoint_id = new_checkpoint_id()
            try:
                info = await backend.checkpoint(sandbox_id, checkpoint_id, memory=memory)
            except CheckpointFailed as exc:
                raise Conflict(f"checkpoint of {sandbox_id!r} failed: {exc}") from exc
        if quota and used + info.size_bytes > quota:
            await backend.delete_checkpoint(checkpoint_id)
            raise QuotaExceeded(f"this checkpoint ({info.size_bytes} bytes) would take the "
                                f"team's checkpoints over its {quota}-byte quota; it was "
                                "discarded and the sandbox keeps running")
        record = CheckpointRecord(
            checkpoint_id=checkpoint_id, team_id=team.team_id, sandbox_id=sandbox_id,
            kind=kind, name=name, created_at=info.created_at, size_bytes=info.size_bytes,
            memory=info.memory, template_id=sbx.template_id,
            envd_access_token=sbx.envd_access_token, cpu_count=sbx.cpu_count,
            memory_mb=sbx.memory_mb, env_vars=dict(sbx.env_vars))
        await self._checkpoint_store.add_checkpoint(record)
        what = EventKind.SNAPSHOT_TAKEN if kind is CheckpointKind.SNAPSHOT \
            else EventKind.CHECKPOINTED
        await self._sandbox_store.add_event(event(
            sandbox_id, team.team_id, what,
            f"{kind.value} {checkpoint_id} taken ({info.size_bytes} bytes)",
            checkpoint=checkpoint_id))
        return record

    async def timeline(self, team: Team, sandbox_id: str) -> list[CheckpointRecord]:
        self._registry.owned(team, sandbox_id)
        return await self._checkpoint_store.list_checkpoints(team.team_id, sandbox_id=sandbox_id,
                                                             kind=CheckpointKind.CHECKPOINT)

    async def _own(self, team: Team, sandbox_id: str, checkpoint_id: str) -> CheckpointRecord:
        found = await self._checkpoint_store.get_checkpoint(checkpoint_id)
        if found is None or found.team_id != team.team_id or found.sandbox_id != sandbox_id \
                or found.kind is not CheckpointKind.CHECKPOINT:
            raise NotFound(f"checkpoint {checkpoint_id!r} of sandbox {sandbox_id!r} not found")
        return found

    async def restore(self, team: Team, sandbox_id: str, checkpoint_id: str) -> LiveSandbox:
        """Roll the sandbox (running or paused) back to one of its checkpoints."""
        backend = self._checkpointable()
        sbx = self._registry.owned(team, sandbox_id)
        await self._own(team, sandbox_id, checkpoint_id)
        async with sbx.lock:
            self._registry.owned(team, sandbox_id)
            spec = await spec_of(self._templates, sbx)
            try:
                endpoint = await backend.restore(spec, checkpoint_id)
            except CheckpointNotFound as exc:
                raise NotFound(f"checkpoint {checkpoint_id!r} is gone from disk") from exc
            sbx.state, sbx.paused_as, sbx.saved_bytes = SandboxState.RUNNING, None, 0
            sbx.attach(endpoint.address, endpoint.envd_port)
            self._registry.update(sbx)
            await self._sandbox_store.update_sandbox(
                sandbox_id, state=sbx.state.value, lifecycle=sbx.lifecycle(),
                event=event(sandbox_id, team.team_id, EventKind.RESTORED,
                            f"restored to checkpoint {checkpoint_id}",
                            checkpoint=checkpoint_id))
            self._lifecycle.arm(sbx)
        return sbx

    async def delete(self, team: Team, sandbox_id: str, checkpoint_id: str) -> None:
        self._registry.owned(team, sandbox_id)
        await self._own(team, sandbox_id, checkpoint_id)
        await self.drop(checkpoint_id)

    async def drop(self, checkpoint_id: str) -> None:
        """Forget a checkpoint and free its disk (any kind; no ownership check)."""
        if isinstance(self._backend, Checkpointable):
            await self._backend.delete_checkpoint(checkpoint_id)
        await self._checkpoint_store.delete_checkpoint(checkpoint_id)

    # schedules --------------------------------------------------------------------------
    async def schedule(self, team: Team, sandbox_id: str, every_s: int | None,
                       keep: int | None) -> None:
        """Take a checkpoint every ``every_s`` seconds keeping the last ``keep`` (None:
        stop)."""
        sbx = self._registry.owned(team, sandbox_id)
        self._checkpointable()
        if every_s is not None:
            if every_s < self._limits.min_checkpoint_interval_s:
                raise InvalidRequest(f"intervalSeconds must be at least "
                                     f"{self._limits.min_checkpoint_interval_s}")
            keep = keep or 5
            if not 1 <= keep <= self._limits.max_checkpoints_kept:
                raise InvalidRequest(f"keep must be 1..{self._limits.max_checkpoints_kept}")
        sbx.checkpoint_every_s, sbx.checkpoint_keep = every_s, keep if every_s else None
        await self._sandbox_store.update_sandbox(sandbox_id, lifecycle=sbx.lifecycle())
        self.start_schedule(sbx, Team(team.team_id, team.name))

    def start_schedule(self, sbx: LiveSandbox, team: Team) -> None:
        """(Re)start the sandbox's schedule as its record says. With several API replicas
        only the leader runs schedules (``Lifecycle.leading``): one set through another
        replica reaches it with the record (``_follow``), and a new leader starts them
        all, so none runs twice."""
        old = self._schedules.pop(sbx.sandbox_id, None)
        self._intervals.pop(sbx.sandbox_id, None)
        if old is not None:
            old.cancel()
        if sbx.checkpoint_every_s and self._lifecycle.leading:
            self._schedules[sbx.sandbox_id] = asyncio.create_task(self._every(sbx, team))
            self._intervals[sbx.sandbox_id] = sbx.checkpoint_every_s

    def _follow(self, sbx: LiveSandbox) -> None:
        """Another replica changed the sandbox's record: a schedule it set or changed
        starts here (if leading); one unchanged keeps its pace."""
        running = self._schedules.get(sbx.sandbox_id)
        if running is not None and not running.done() \
                and self._intervals.get(sbx.sandbox_id) == sbx.checkpoint_every_s:
            return
        if running is None and not sbx.checkpoint_every_s:
            return
        self.start_schedule(sbx, Team(sbx.team_id, sbx.team_id))

    async def _every(self, sbx: LiveSandbox, team: Team) -> None:
        while sbx.checkpoint_every_s:
            await sleep(self._lifecycle.clock, sbx.checkpoint_every_s)
            if sbx.state is not SandboxState.RUNNING:
                continue  # paused sandboxes do not change
            try:
                stamp = f"auto-{datetime.now(UTC):%Y%m%dT%H%M%S}"
                await self.take(team, sbx.sandbox_id, name=stamp, scheduled=True)
                kept = await self._checkpoint_store.list_checkpoints(
                    team.team_id, sandbox_id=sbx.sandbox_id, kind=CheckpointKind.CHECKPOINT)
                autos = [c for c in kept if (c.name or "").startswith("auto-")]
                for old in autos[: max(0, len(autos) - (sbx.checkpoint_keep or 1))]:
                    await self.drop(old.checkpoint_id)
            except NotFound:
                return
            except Exception:
                log.exception("scheduled checkpoint of %s failed", sbx.sandbox_id)

    def close(self) -> None:
        for task in self._schedules.values():
            task.cancel()
        self._schedules.clear()
        self._intervals.clear()

    async def sweep(self) -> None:
        """At start-up: drop what a crash left behind — checkpoints of sandboxes that are
        no longer live (their end was not seen) and half-done forks' shared ones."""
        for found in await self._checkpoint_store.list_checkpoints(None):
            gone = self._registry.get(found.sandbox_id) is None
            if found.kind is CheckpointKind.FORK or (
                    found.kind is CheckpointKind.CHECKPOINT and gone):
                try:
                    await self.drop(found.checkpoint_id)
                except Exception:
                    log.exception("dropping stale checkpoint %s failed", found.checkpoint_id)

    async def _forget(self, sbx: LiveSandbox) -> None:
        """A sandbox ended: its timeline goes with it (snapshots stay)."""
        task = self._schedules.pop(sbx.sandbox_id, None)
        self._intervals.pop(sbx.sandbox_id, None)
        if task is not None:
            task.cancel()
        for found in await self._checkpoint_store.list_checkpoints(
                sbx.team_id, sandbox_id=sbx.sandbox_id, kind=CheckpointKind.CHECKPOINT):
            await self.drop(found.checkpoint_id)
