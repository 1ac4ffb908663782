"""Snapshots and forks, as E2B defines them.

A *snapshot* is a checkpoint that outlives its sandbox: ``Sandbox.create(snapshot_id)``
starts a new sandbox from it (the creator looks snapshot ids and names up first), and it
stays until deleted (``DELETE /templates/{id}``). A *fork* checkpoints a running sandbox
once (it keeps running, id and timeout untouched) and starts ``count`` new sandboxes from
that state, each with its own id, token, address and network; each succeeds or fails on
its own. The shared checkpoint is deleted once the forks have started: each copy has its
own files.
"""

from __future__ import annotations

import asyncio
import re

from bac_server.store import CheckpointKind, CheckpointRecord, CheckpointStore, SandboxStore

from ..errors import ControlError, InvalidRequest
from ..keys import Team
from ..sandboxes import (
    CreateRequest,
    Creator,
    EventKind,
    LiveSandbox,
    Registry,
    event,
    policy_of,
)
from ._timeline import Checkpoints

MAX_FORKS = 20
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}(:[A-Za-z0-9._-]{1,64})?$")


class Snapshots:
    def __init__(self, *, checkpoints: Checkpoints, creator: Creator,
                 checkpoint_store: CheckpointStore, sandbox_store: SandboxStore,
                 registry: Registry) -> None:
        self._checkpoints = checkpoints
        self._creator = creator
        self._checkpoint_store = checkpoint_store
        self._sandbox_store = sandbox_store
        self._registry = registry

    async def create(self, team: Team, sandbox_id: str, *, name: str | None,
                     memory: bool) -> CheckpointRecord:
        if name is not None:
            if not _NAME.match(name):
                raise InvalidRequest(f"invalid snapshot name {name!r}")
            for old in await self._checkpoint_store.list_checkpoints(
                    team.team_id, kind=CheckpointKind.SNAPSHOT, name=name):
                # E2B: a name already in use gets the new build; the old one goes.
                await self._checkpoints.drop(old.checkpoint_id)
        return await self._checkpoints.take(team, sandbox_id, name=name, memory=memory,
                                            kind=CheckpointKind.SNAPSHOT)

    async def listing(self, team: Team, *, sandbox_id: str | None = None,
                   name: str | None = None) -> list[CheckpointRecord]:
        found = await self._checkpoint_store.list_checkpoints(
            team.team_id, kind=CheckpointKind.SNAPSHOT, sandbox_id=sandbox_id)
        if name is not None:
            found = [s for s in found if name in (s.checkpoint_id, s.name)]
        return found[::-1]  # newest first

    async def delete(self, team: Team, ref: str) -> bool:
        for found in await self._checkpoint_store.list_checkpoints(
                team.team_id, kind=CheckpointKind.SNAPSHOT):
            if ref in (found.checkpoint_id, found.name):
                await self._checkpoints.drop(found.checkpoint_id)
                return True
        return False

    async def fork(self, team: Team, sandbox_id: str, *, count: int,
                   timeout_s: int | None) -> list[LiveSandbox | ControlError]:
        if not 1 <= count <= MAX_FORKS:
            raise InvalidRequest(f"count must be between 1 and {MAX_FORKS}, got {count}")
        parent = self._registry.owned(team, sandbox_id)
        shared = await self._checkpoints.take(team, sandbox_id, kind=CheckpointKind.FORK)
        try:
            request = CreateRequest(
                template=parent.template_id, timeout_s=timeout_s,
                metadata=dict(parent.metadata), cpu_count=parent.cpu_count,
                memory_mb=parent.memory_mb,
                allow_public_traffic=parent.traffic_access_token is None,
                network=parent.network, allow_internet_access=parent.allow_internet_access,
                egress=policy_of(parent))
            results = await asyncio.gather(
                *(self._creator.create(team, request, from_checkpoint=shared)
                  for _ in range(count)), return_exceptions=True)
        finally:
            await self._checkpoints.drop(shared.checkpoint_id)
        out: list[LiveSandbox | ControlError] = []
        for result in results:
            if isinstance(result, LiveSandbox | ControlError):
                out.append(result)
            elif isinstance(result, BaseException):
                raise result
        made = [r.sandbox_id for r in out if isinstance(r, LiveSandbox)]
        await self._sandbox_store.add_event(event(sandbox_id, team.team_id, EventKind.FORKED,
                                                  f"forked into {', '.join(made) or 'nothing'}",
                                                  forks=",".join(made)))
        return out
