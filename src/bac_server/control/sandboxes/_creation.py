"""Creating sandboxes, in one line: validate the request against limits, resolve the
template (and its start snapshot) and pin the sandbox to its build, check the team's limit
and reserve the sandbox in the registry, record it and ask the backend at once, and arm
its timeout.

The row is written while the backend works (one write, overlapped), and the answer goes
out only once both are done, so a sandbox a client was told about survives a server
restart. The work runs in its own task: a client that hangs up mid-create cannot cancel it
half-way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bac_server.backends.base import (
    Backend,
    Checkpointable,
    NoCapacity,
    ResourceLimitError,
    SandboxEndpoint,
    SandboxSpec,
    TemplateImage,
    TemplateNotFound,
)
from bac_server.backends.egress import EgressPolicy
from bac_server.store import CheckpointKind, CheckpointRecord, CheckpointStore, SandboxStore

from ..errors import (
    InvalidRequest,
    NotSupported,
    OutOfCapacity,
    SandboxCreateFailed,
    TeamLimitExceeded,
    TemplateNotFoundError,
)
from ..keys import Team
from ..limits import Limits
from ..templates import Resolved, StartSnapshots, TemplateSource
from ..tokens import new_access_token, new_sandbox_id
from ._events import EventKind, event
from ._lifecycle import Lifecycle
from ._observer import LifecycleObserver
from ._registry import NO_END, LiveSandbox, OnTimeout, Registry
from ._states import SandboxState, check_transition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IdlePolicy:
    """A create's idle policy; each None is the server's default."""

    after_s: int | None = None
    cpu_pct: float | None = None
    action: OnTimeout | None = None


@dataclass(frozen=True)
class CreateRequest:
    template: str
    # Seconds to live; 0: no end; None: the team's default.
    timeout_s: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    cpu_count: int | None = None
    memory_mb: int | None = None
    allow_public_traffic: bool = True
    network: dict[str, Any] | None = None
    allow_internet_access: bool | None = None
    # Lifecycle (E2B ``autoPause``, ``autoPauseMemory``, ``autoResume``).
    on_timeout: OnTimeout = OnTimeout.KILL
    pause_memory: bool = True
    # None: on when the sandbox has an idle policy (an idle pause is undone by traffic).
    auto_resume: bool | None = None
    idle: IdlePolicy = field(default_factory=IdlePolicy)
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    # The volumes it will mount once made (``Volumes.attach``): placed where they are.
    volumes: tuple[str, ...] = ()


class Creator:
    def __init__(
        self,
        *,
        backend: Backend,
        templates: TemplateSource,
        sandbox_store: SandboxStore,
        checkpoint_store: CheckpointStore,
        registry: Registry,
        lifecycle: Lifecycle,
        limits: Limits,
        start_snapshots: StartSnapshots | None = None,
        observer: LifecycleObserver | None = None,
    ) -> None:
        self._backend = backend
        self._observer = observer
        self._start_snapshots = start_snapshots
        self._templates = templates
        self._sandbox_store = sandbox_store
        self._checkpoint_store = checkpoint_store
        self._registry = registry
        self._lifecycle = lifecycle
        self._limits = limits

    def validate(self, req: CreateRequest, team: Team | None = None) -> tuple[int, int, int]:
        """Check the request against the limits; returns (timeout (0: no end), cpus,
        memory MiB)."""
        lim = self._limits
        default = None if team is None else lim.default_timeout(team.team_id, team.name)
        timeout = lim.lifetime(req.timeout_s, default=default)
        idle = req.idle
        if idle.after_s is not None:
            lim.timeout(idle.after_s, "idle.after")
        if idle.cpu_pct is not None and not 0 <= idle.cpu_pct <= 100:
            raise InvalidRequest(f"idle.cpuBelowPct must be between 0 and 100, "
                                 f"got {idle.cpu_pct}")
        cpus, memory = lim.cpus(req.cpu_count), lim.memory(req.memory_mb)
        self._check_map("metadata", req.metadata, lim.max_metadata_entries)
        self._check_map("envVars", req.env_vars, lim.max_env_vars)
        for name in req.env_vars:
            if not name or "=" in name or "\0" in name:
                raise InvalidRequest(f"envVars name {name!r} is not a valid variable name")
        return timeout, cpus, memory

    def _check_map(self, what: str, values: dict[str, str], max_entries: int) -> None:
        if len(values) > max_entries:
            raise InvalidRequest(f"{what} has {len(values)} entries, the limit is {max_entries}")
        for key, value in values.items():
            if len(key.encode()) > self._limits.max_key_bytes:
                raise InvalidRequest(
                    f"{what} key longer than {self._limits.max_key_bytes} bytes: {key[:32]!r}"
                )
            if len(value.encode()) > self._limits.max_value_bytes:
                raise InvalidRequest(
                    f"{what}[{key!r}] is longer than {self._limits.max_value_bytes} bytes"
                )
            if "\0" in key or "\0" in value:
                raise InvalidRequest(f"{what}[{key!r}] contains a NUL byte")

    async def _from_checkpoint(self, source: CheckpointRecord) -> Resolved:
        """The build the checkpointed sandbox ran on (its template may have moved on)."""
        pinned = await self._templates.pinned(source.sandbox_id)
        if pinned is not None:
            return pinned
        return Resolved(await self._templates.get(source.template_id))

    async def _snapshot(self, team: Team, ref: str) -> CheckpointRecord | None:
        """The team's snapshot named ``ref`` (by id or name), if ``ref`` is one."""
        for found in await self._checkpoint_store.list_checkpoints(team.team_id,
                                                                  kind=CheckpointKind.SNAPSHOT):
            if ref in (found.checkpoint_id, found.name):
                return found
        return None

    async def create(self, team: Team, req: CreateRequest, *,
                     from_checkpoint: CheckpointRecord | None = None) -> LiveSandbox:
        """A new sandbox; from a snapshot when ``req.template`` names one of the team's, or
        from ``from_checkpoint`` (forks)."""
        timeout, cpus, memory = self.validate(req, team)
        source = from_checkpoint
        if source is None:
            try:
                # Built-ins, then the team's own or a public template (name[:tag], id, alias).
                resolved = await self._templates.resolve(team, req.template)
            except TemplateNotFoundError:
                # Not a template: maybe one of the team's snapshots (looked up only then,
                # so plain creates pay nothing for snapshots).
                source = await self._snapshot(team, req.template)
                if source is None:
                    raise
            else:
                # A built template's resources (and a built-in's memory, the desktop's)
                # are its sandboxes' defaults, within the server's maxima.
                cpus = min(resolved.cpu_count, self._limits.max_cpu_count) \
                    if req.cpu_count is None and resolved.cpu_count else cpus
                memory = min(resolved.memory_mb, self._limits.max_memory_mb) \
                    if req.memory_mb is None and resolved.memory_mb else memory
        if source is not None:
            if not isinstance(self._backend, Checkpointable):
                raise NotSupported(
                    f"the {self._backend.name!r} backend cannot start from snapshots")
            resolved = await self._from_checkpoint(source)
            cpus = source.cpu_count if req.cpu_count is None else cpus
            memory = source.memory_mb if req.memory_mb is None else memory
        # The template's start snapshot, when it has one, for the backend to start from.
        image = resolved.image if source is not None or self._start_snapshots is None \
            else await self._start_snapshots.image_of(resolved)
        sandbox_id = new_sandbox_id()
        # Before the count (SQLite writes one transaction at a time: beside the row's
        # insert it would wait on its lock); a pin left by a create refused below is
        # dropped at the next start-up.
        await self._templates.pin(sandbox_id, resolved)
        # From the count to the add no await: concurrent creates see each other.
        if self._registry.live_count(team.team_id) >= self._limits.max_sandboxes_per_team:
            raise TeamLimitExceeded(
                f"team {team.name!r} already runs {self._limits.max_sandboxes_per_team} "
                "sandboxes, the most it may; kill one first"
            )
        now = self._lifecycle.clock.now()
        idle_after = req.idle.after_s if req.idle.after_s is not None \
            else self._limits.idle_default(has_end=timeout > 0)
        sbx = LiveSandbox(
            sandbox_id=sandbox_id,
            team_id=team.team_id,
            template_id=image.template_id,
            alias=req.template if req.template != image.template_id else None,
            cpu_count=cpus,
            memory_mb=memory,
            disk_mb=self._limits.default_disk_mb,
            envd_access_token=new_access_token(),
            traffic_access_token=None if req.allow_public_traffic else new_access_token(),
            metadata=dict(req.metadata),
            env_vars={**(source.env_vars if source else {}), **req.env_vars},
            network=req.network,
            allow_internet_access=req.allow_internet_access,
            started_at=now,
            end_at=now + timedelta(seconds=timeout) if timeout else NO_END,
            state=SandboxState.CREATING,
            on_timeout=req.on_timeout,
            pause_memory=req.pause_memory,
            auto_resume=req.auto_resume if req.auto_resume is not None else idle_after > 0,
            timeout_s=timeout,
            idle_after_s=idle_after,
            idle_cpu_pct=req.idle.cpu_pct if req.idle.cpu_pct is not None
            else self._limits.idle_cpu_pct,
            idle_action=req.idle.action or OnTimeout.PAUSE,
            key_name=team.key_name,
        )
        self._registry.add(sbx)
        task = asyncio.create_task(self._make(sbx, image, req.egress, source, resolved,
                                              req.volumes))
        return await asyncio.shield(task)

    async def _make(self, sbx: LiveSandbox, image: TemplateImage, egress: EgressPolicy,
                    source: CheckpointRecord | None, resolved: Resolved,
                    volumes: tuple[str, ...] = ()) -> LiveSandbox:
        spec = SandboxSpec(
            sandbox_id=sbx.sandbox_id,
            template=image,
            vcpus=sbx.cpu_count,
            memory_mb=sbx.memory_mb,
            disk_mb=sbx.disk_mb,
            env_vars=dict(sbx.env_vars),
            envd_access_token=sbx.envd_access_token,
            # The rules' secret placeholders name the team's secrets.
            network=dataclasses.replace(egress, team=sbx.team_id),
            volumes=volumes,
        )
        # The one write a create needs overlaps the backend's work: the row goes in as
        # running (with its created and started events) while the sandbox starts. A crash
        # in between is repaired at start-up either way: a row without a sandbox becomes
        # "died", a sandbox without a row is destroyed.
        row = dataclasses.replace(sbx.to_record(), state=SandboxState.RUNNING.value)
        created = event(sbx.sandbox_id, sbx.team_id, EventKind.CREATED,
                        f"created from template {image.template_id}",
                        **_template_fields(image, resolved, source))
        began = time.monotonic()
        stored, made = await asyncio.gather(
            self._sandbox_store.insert_sandbox(row, created),
            self._start(spec, source),
            return_exceptions=True,
        )
        took = time.monotonic() - began
        how = _how(made, source)
        if self._observer is not None:
            if isinstance(made, BaseException) or isinstance(stored, BaseException):
                self._observer.create_failed(image.template_id)
            else:
                self._observer.created(how, image.template_id, took)
        if isinstance(made, BaseException):
            await self._failed(sbx, made, recorded=not isinstance(stored, BaseException))
            raise _domain_error(made, image) from made
        if isinstance(stored, BaseException):
            await self._failed(sbx, stored, recorded=False)
            raise SandboxCreateFailed(f"recording the sandbox failed: {stored}") from stored
        # How it was made and what each part took: known once the backend answered.
        await self._sandbox_store.add_event(event(
            sbx.sandbox_id, sbx.team_id, EventKind.STARTED, f"started ({how}, "
            f"{took * 1000:.0f} ms)", how=how, total_ms=f"{took * 1000:.1f}",
            **_timing_fields(made)))
        if made.start_snapshot_lost and self._start_snapshots is not None:
            await self._start_snapshots.lost(resolved, image)
        async with sbx.lock.here:  # new: no other replica steps on it yet
            check_transition(sbx.state, SandboxState.RUNNING)
            sbx.state = SandboxState.RUNNING
            sbx.attach(made.address, made.envd_port)
            self._registry.update(sbx)
            self._lifecycle.arm(sbx)
        return sbx

    async def _start(self, spec: SandboxSpec, source: CheckpointRecord | None
                     ) -> SandboxEndpoint:
        if source is None:
            return await self._backend.create(spec)
        assert isinstance(self._backend, Checkpointable)
        return await self._backend.create_from(spec, source.checkpoint_id,
                                               source_token=source.envd_access_token)

    async def _failed(self, sbx: LiveSandbox, exc: BaseException, *, recorded: bool) -> None:
        check_transition(sbx.state, SandboxState.FAILED)
        sbx.state = SandboxState.FAILED
        self._registry.remove(sbx.sandbox_id)
        log.warning("creating sandbox %s failed: %s", sbx.sandbox_id, exc)
        try:
            # The backend already released what it made when it raised; a cancelled
            # create may have left a half-made sandbox, and destroy is idempotent.
            await self._backend.destroy(sbx.sandbox_id)
        except Exception:
            log.exception("cleaning up the failed create of %s", sbx.sandbox_id)
        if not recorded:
            return
        try:
            await self._sandbox_store.update_sandbox(
                sbx.sandbox_id,
                state=sbx.state.value,
                ended_at=self._lifecycle.clock.now(),
                event=event(sbx.sandbox_id, sbx.team_id, EventKind.CREATE_FAILED,
                            f"create failed: {exc}", level="error"),
            )
        except Exception:
            log.exception("recording the failed create of %s", sbx.sandbox_id)


def _domain_error(exc: BaseException, image: TemplateImage) -> BaseException:
    if isinstance(exc, ResourceLimitError):
        return InvalidRequest(str(exc))
    if isinstance(exc, NoCapacity):
        return OutOfCapacity(str(exc))
    if isinstance(exc, TemplateNotFound):
        return TemplateNotFoundError(image.template_id)
    if isinstance(exc, Exception):
        return SandboxCreateFailed(f"creating the sandbox failed: {exc}")
    return exc


def _template_fields(image: TemplateImage, resolved: Resolved,
                     source: CheckpointRecord | None) -> dict[str, str]:
    """What a created event says of where the sandbox came from."""
    fields = {"template": image.template_id}
    if resolved.build_id is not None:
        fields["build"] = resolved.build_id
    if resolved.digest is not None:
        fields["digest"] = resolved.digest
    if source is not None:
        fields["checkpoint"] = source.checkpoint_id
    if image.start_snapshot is not None:
        fields["start_snapshot"] = image.start_snapshot.checkpoint_id
    return fields


def _how(made: SandboxEndpoint | BaseException, source: CheckpointRecord | None) -> str:
    """How the backend made it: pool, start_snapshot or boot (its word), a checkpoint's
    copy, or unknown when it cannot tell."""
    if source is not None:
        return "checkpoint"
    if isinstance(made, SandboxEndpoint) and made.timing is not None:
        return made.timing.how
    return "unknown"


def _timing_fields(made: SandboxEndpoint) -> dict[str, str]:
    if made.timing is None:
        return {}
    return {f"{name}_ms": f"{ms:.1f}" for name, ms in made.timing.parts_ms.items()}
