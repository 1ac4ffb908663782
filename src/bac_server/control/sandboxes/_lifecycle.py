"""Lifecycle steps on existing sandboxes: timeouts, kill, connect, refresh, pause, resume.

A step given no number of seconds grants the default timeout (``Limits.default_timeout_s``);
a sandbox created without an end (timeout 0) is resumed without one.

Every step takes the sandbox's lock, checks the transition table, updates the registry first
(so the gateway stops or starts routing at once), then the store, then the backend. Expiry is
one timer per running sandbox on the control plane's clock (:mod:`..clock`), re-armed
whenever the end time moves; at the end a sandbox is killed, or paused when it was created
with ``autoPause`` (:mod:`._pausing`). Paused sandboxes never expire, and a sandbox may have
no end at all (``NO_END``): only the operator's ``max_timeout_s`` caps a lifetime. A
sandbox's idle policy (:mod:`._idle`) is armed beside its timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from bac_server.backends.base import Backend, BackendError, SandboxStatus
from bac_server.store import SandboxStore

from ..clock import Clock, SystemClock
from ..errors import Conflict
from ..keys import Team
from ..limits import Limits
from ..templates import TemplateSource
from ._events import EndReason, EventKind, event
from ._idle import IdleWatch
from ._observer import LifecycleObserver
from ._pausing import Pausing
from ._registry import NO_END, LiveSandbox, OnTimeout, Registry
from ._states import SandboxState, check_transition

log = logging.getLogger(__name__)


class Lifecycle:
    def __init__(self, *, backend: Backend, sandbox_store: SandboxStore, registry: Registry,
                 limits: Limits, templates: TemplateSource, clock: Clock | None = None,
                 idle_cpu_window_s: float = 1.0, observer: LifecycleObserver | None = None):
        self._backend = backend
        self._sandbox_store = sandbox_store
        self._registry = registry
        self._limits = limits
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._tasks: set[asyncio.Task[None]] = set()
        self.pausing = Pausing(backend=backend, sandbox_store=sandbox_store, registry=registry,
                               templates=templates, arm=self.arm, clock=self.clock,
                               observer=observer)
        self.idle = IdleWatch(backend=backend, clock=self.clock, act=self._idle_act,
                              cpu_window_s=idle_cpu_window_s)
        # Called with each sandbox that ended (e.g. to drop its checkpoints).
        self.on_end: list[Callable[[LiveSandbox], Awaitable[None]]] = []
        # Called with each sandbox whose record another replica changed, once applied
        # here (e.g. to run its checkpoint schedule as the record now says).
        self.on_followed: list[Callable[[LiveSandbox], None]] = []
        # Whether this process arms timers: with several API replicas only the leader
        # does (docs/scale-out.md); the others follow its changes through the store.
        self.leading = True

    # timers -------------------------------------------------------------------------------
    def arm(self, sbx: LiveSandbox) -> None:
        """(Re)schedule the sandbox's end and its idle check; only running sandboxes
        expire, and only those with an end."""
        if sbx.timer is not None:
            sbx.timer.cancel()
            sbx.timer = None
        if not self.leading:
            self.idle.disarm(sbx)
            return
        self.idle.arm(sbx)
        if sbx.state is not SandboxState.RUNNING or not sbx.has_end:
            return
        sandbox_id = sbx.sandbox_id
        sbx.timer = self.clock.call_at(sbx.end_at, lambda: self._fire(sandbox_id))

    def _fire(self, sandbox_id: str) -> None:
        task = asyncio.create_task(self._expire(sandbox_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _expire(self, sandbox_id: str) -> None:
        sbx = self._registry.get(sandbox_id)
        if sbx is None:
            return
        async with sbx.lock:
            if sbx.state is not SandboxState.RUNNING:
                return
            if sbx.end_at > self.clock.now() + timedelta(milliseconds=5):
                self.arm(sbx)  # extended while this task waited for the lock
                return
            if sbx.on_timeout is OnTimeout.PAUSE:
                try:
                    await self.pausing.pause(sbx, memory=sbx.pause_memory,
                                             kind=EventKind.TIMEOUT,
                                             message="timeout reached: paused (autoPause)")
                    return
                except Exception:
                    # Never lose the sandbox silently: it keeps running, re-armed.
                    log.exception("auto-pause of %s failed; it keeps running", sandbox_id)
                    sbx.end_at = self.clock.now() + timedelta(seconds=60)
                    self.arm(sbx)
                    return
            await self.end(sbx, SandboxState.KILLED, EventKind.TIMEOUT, "timeout reached")

    async def _idle_act(self, sbx: LiveSandbox, why: str) -> None:
        """The idle policy's action (``idle_action``), the caller holding the lock."""
        if sbx.idle_action is OnTimeout.KILL:
            await self.end(sbx, SandboxState.KILLED, EventKind.KILLED,
                           f"{why}: killed (idle policy)", reason=EndReason.IDLE)
            return
        await self.pausing.pause(sbx, memory=sbx.pause_memory, kind=EventKind.PAUSED,
                                 message=f"{why}: paused (idle policy)")

    async def settle(self) -> None:
        """Wait for the expiries and idle checks already started (a simulation's step)."""
        while pending := self._tasks | self.idle.tasks:
            await asyncio.gather(*pending, return_exceptions=True)

    def close(self) -> None:
        """Stop every timer (sandboxes keep running; a restart re-arms them)."""
        for sbx in self._registry.all():
            if sbx.timer is not None:
                sbx.timer.cancel()
                sbx.timer = None
            self.idle.disarm(sbx)
        for task in self._tasks:
            task.cancel()
        self.idle.close()

    # ending -------------------------------------------------------------------------------
    async def end(
        self, sbx: LiveSandbox, state: SandboxState, kind: EventKind, message: str,
        *, reason: EndReason | None = None,
    ) -> None:
        """Move to a final state and release everything. Caller holds ``sbx.lock``.
        ``reason`` (default: the kind's, a request for a kill) goes in the event."""
        why = reason or {EventKind.TIMEOUT: EndReason.TIMEOUT,
                         EventKind.DIED: EndReason.CRASH}.get(kind, EndReason.REQUEST)
        check_transition(sbx.state, state)
        if sbx.timer is not None:
            sbx.timer.cancel()
            sbx.timer = None
        self.idle.disarm(sbx)
        sbx.state = state
        self._registry.update(sbx)
        now = self.clock.now()
        try:
            await self._sandbox_store.update_sandbox(
                sbx.sandbox_id,
                state=state.value,
                ended_at=now,
                event=event(sbx.sandbox_id, sbx.team_id, kind, message, reason=why.value),
            )
        finally:
            try:
                await self._backend.destroy(sbx.sandbox_id)
            except BackendError:
                # Left for reconciliation: at the next start the backend still lists it
                # while the store does not, and it is destroyed then.
                log.exception("destroying sandbox %s failed", sbx.sandbox_id)
            for hook in self.on_end:
                try:
                    await hook(sbx)
                except Exception:
                    log.exception("cleaning up after sandbox %s failed", sbx.sandbox_id)

    async def died(self, sbx: LiveSandbox) -> None:
        """End a running sandbox whose processes are gone (found by the sampler): checked
        again under its lock, where no pause, resume or roll-back is under way."""
        async with sbx.lock:
            if self._registry.get(sbx.sandbox_id) is not sbx or \
                    sbx.state is not SandboxState.RUNNING:
                return
            try:
                if await self._backend.status(sbx.sandbox_id) is not SandboxStatus.STOPPED:
                    return
            except BackendError:
                return
            await self.end(sbx, SandboxState.DIED, EventKind.DIED,
                           "its processes died while it ran", reason=EndReason.CRASH)

    async def kill(self, team: Team, sandbox_id: str) -> None:
        sbx = self._registry.owned(team, sandbox_id)
        async with sbx.lock:
            self._registry.owned(team, sandbox_id)  # may have ended while we waited
            await self.end(sbx, SandboxState.KILLED, EventKind.KILLED, "killed by request")

    # timeouts -----------------------------------------------------------------------------
    def _seconds(self, value: int | None, what: str) -> timedelta:
        return timedelta(seconds=self._limits.timeout(value, what))

    async def set_timeout(self, team: Team, sandbox_id: str, seconds: int) -> None:
        """End the sandbox ``seconds`` from now (may shorten; 0 ends it now)."""
        delta = self._seconds(seconds, "timeout")
        sbx = self._registry.owned(team, sandbox_id)
        async with sbx.lock:
            self._registry.owned(team, sandbox_id)
            await self._move_end(sbx, self.clock.now() + delta, EventKind.TIMEOUT_SET)

    async def refresh(self, team: Team, sandbox_id: str, seconds: int | None) -> None:
        """Keep-alive: the end at least ``seconds`` from now, never earlier; a paused
        sandbox is left as it is."""
        delta = self._seconds(seconds, "duration")
        sbx = self._registry.owned(team, sandbox_id)
        async with sbx.lock:
            self._registry.owned(team, sandbox_id)
            if sbx.state is not SandboxState.PAUSED:
                await self._push_end(sbx, delta, EventKind.TIMEOUT_SET)

    async def connect(self, team: Team, sandbox_id: str, seconds: int | None, *,
                      memory: bool = True) -> bool:
        """A client connects: a running sandbox gets its end pushed out to at least
        ``seconds`` from now (never pulled in), a paused one is resumed for ``seconds``
        (``memory=False``: afresh on its files). True when it was resumed."""
        delta = self._seconds(seconds, "timeout")
        sbx = self._registry.owned(team, sandbox_id)
        async with sbx.lock:
            self._registry.owned(team, sandbox_id)
            if sbx.state is SandboxState.PAUSED:
                await self.pausing.resume(sbx, seconds=self._resumed_for(sbx, seconds, delta),
                                          memory=memory)
                return True
            await self._push_end(sbx, delta, EventKind.CONNECTED)
            return False

    @staticmethod
    def _resumed_for(sbx: LiveSandbox, seconds: int | None, delta: timedelta) -> int | None:
        """How long a resume grants: what was asked, else none for a sandbox created
        without an end (None: no end), else the default."""
        if seconds is None and sbx.timeout_s == 0:
            return None
        return int(delta.total_seconds())

    async def _push_end(self, sbx: LiveSandbox, delta: timedelta, kind: EventKind) -> None:
        wanted = self.clock.now() + delta
        if wanted > sbx.end_at:
            await self._move_end(sbx, wanted, kind)

    async def _move_end(self, sbx: LiveSandbox, end_at: datetime, kind: EventKind) -> None:
        before, sbx.end_at = sbx.end_at, end_at
        said = end_at.isoformat() if end_at < NO_END else "none (no end)"
        await self._sandbox_store.update_sandbox(
            sbx.sandbox_id,
            end_at=end_at,
            event=event(
                sbx.sandbox_id, sbx.team_id, kind, f"end moved to {said}",
                end_at=end_at.isoformat(),
                previous_end_at=before.isoformat() if before < NO_END else "none",
                change="extended" if end_at > before else "shortened",
            ),
        )
        self.arm(sbx)

    # pause / resume ----------------------------------------------------------------------
    async def pause(self, team: Team, sandbox_id: str, *, memory: bool = True) -> None:
        sbx = self._registry.owned(team, sandbox_id)
        self.pausing.kind_for(memory)  # NotSupported before anything changes
        async with sbx.lock:
            self._registry.owned(team, sandbox_id)
            if sbx.state is SandboxState.PAUSED:
                raise Conflict(f"sandbox {sandbox_id!r} is already paused")
            await self.pausing.pause(sbx, memory=memory, kind=EventKind.PAUSED,
                                     message="paused by request")

    async def resume(self, team: Team, sandbox_id: str, seconds: int | None, *,
                     memory: bool = True, on_timeout: OnTimeout | None = None) -> None:
        """Resume the paused sandbox for ``seconds``; ``on_timeout``, when given, is what
        its next timeout does from now on."""
        delta = self._seconds(seconds, "timeout")
        sbx = self._registry.owned(team, sandbox_id)
        async with sbx.lock:
            self._registry.owned(team, sandbox_id)
            if sbx.state is not SandboxState.PAUSED:
                raise Conflict(f"sandbox {sandbox_id!r} is already running")
            await self.pausing.resume(sbx, seconds=self._resumed_for(sbx, seconds, delta),
                                      memory=memory, on_timeout=on_timeout)
