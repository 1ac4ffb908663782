"""Pausing and resuming sandboxes: which kind of pause, and automatic resume on traffic.

Three kinds, chosen here (docs/pause-and-checkpoints.md says why):

* ``disk`` — full state: processes, memory, PTYs, listening sockets and files are saved
  by the backend (CRIU) and the memory is freed. Survives a server restart and a reboot,
  lasts as long as the disk does. The default of ``pause`` (E2B ``mode="full"``).
* ``filesystem`` — files only (E2B ``mode="filesystem"``, ``memory: false``): processes
  end; resume starts the sandbox afresh on its files.
* ``freezer`` — processes stopped in place (cgroup freezer), memory stays resident: instant
  both ways but not durable. Used for a full-state pause only when the backend cannot
  save memory (no CRIU on the host).

Callers hold ``sbx.lock``. A paused sandbox has no timer: it never expires.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from bac_server.backends.base import (
    Backend,
    Checkpointable,
    CheckpointFailed,
    NoCapacity,
    NodeUnreachable,
    Pausable,
    PauseKind,
)
from bac_server.store import SandboxStore

from ..clock import Clock, SystemClock
from ..errors import (
    CapReached,
    Conflict,
    NotSupported,
    OutOfCapacity,
    PauseFailed,
    ResumeFailed,
)
from ..templates import TemplateSource
from ._events import EventKind, event
from ._observer import LifecycleObserver
from ._registry import NO_END, LiveSandbox, OnTimeout, Registry, Route
from ._specs import spec_of
from ._states import SandboxState, check_transition

log = logging.getLogger(__name__)

# What holds a sandbox a cost cap paused (``LiveSandbox.held``; ``control.metering``).
CAP_HOLD = "cap"

class Pausing:
    def __init__(self, *, backend: Backend, sandbox_store: SandboxStore, registry: Registry,
                 templates: TemplateSource, arm: Callable[[LiveSandbox], None],
                 clock: Clock | None = None, observer: LifecycleObserver | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._observer = observer
        self._backend = backend
        self._sandbox_store = sandbox_store
        self._registry = registry
        self._templates = templates
        self._arm = arm
        # Lets a sandbox a cost cap paused (``held`` "cap") resume, or raises
        # ``CapReached`` while the cap is reached (``control.metering``); None: no caps.
        self.cap_gate: Callable[[LiveSandbox], None] | None = None

    def kind_for(self, memory: bool) -> PauseKind:
        """The pause this backend gives for a request with or without memory."""
        backend = self._backend
        if isinstance(backend, Checkpointable):
            if not memory:
                return PauseKind.FILESYSTEM
            if backend.memory_checkpoints:
                return PauseKind.DISK
        if memory and isinstance(backend, Pausable):
            return PauseKind.FREEZER
        raise NotSupported(
            f"the {backend.name!r} backend cannot pause sandboxes"
            + ("" if memory else " without their memory"))

    async def pause(self, sbx: LiveSandbox, *, memory: bool, kind: EventKind,
                    message: str) -> None:
        paused_as = self.kind_for(memory)
        check_transition(sbx.state, SandboxState.PAUSED)
        # The gateway stops routing before the processes stop.
        sbx.state = SandboxState.PAUSED
        sbx.paused_as = paused_as
        sbx.saved_bytes = 0
        self._registry.update(sbx)
        self._arm(sbx)  # cancels the timer: paused sandboxes do not expire
        began = time.monotonic()
        written = 0
        try:
            if paused_as is PauseKind.FREEZER:
                assert isinstance(self._backend, Pausable)
                await self._backend.pause(sbx.sandbox_id)
            else:
                assert isinstance(self._backend, Checkpointable)
                written = await self._backend.suspend(sbx.sandbox_id,
                                                      memory=paused_as is PauseKind.DISK)
        except BaseException as exc:
            sbx.state, sbx.paused_as, sbx.saved_bytes = SandboxState.RUNNING, None, 0
            self._registry.update(sbx)
            self._arm(sbx)
            if isinstance(exc, CheckpointFailed):
                # The reason names host paths and CRIU's log: the server's log only.
                log.warning("pausing %s failed: %s", sbx.sandbox_id, exc)
                raise PauseFailed(f"pausing sandbox {sbx.sandbox_id!r} failed: its state "
                                  "could not be saved") from exc
            raise
        took = time.monotonic() - began
        if written:
            sbx.saved_bytes = written
            self._registry.update(sbx)  # the meter charges it as storage from now
        if self._observer is not None:
            self._observer.paused(paused_as.value, took)
        await self._sandbox_store.update_sandbox(
            sbx.sandbox_id, state=sbx.state.value, lifecycle=sbx.lifecycle(),
            event=event(sbx.sandbox_id, sbx.team_id, kind, message,
                        mode=paused_as.value, duration_ms=f"{took * 1000:.1f}",
                        bytes=str(written)))

    async def resume(self, sbx: LiveSandbox, *, seconds: int | None, memory: bool = True,
                     message: str = "resumed", on_timeout: OnTimeout | None = None) -> None:
        """Resume for ``seconds`` (None: without an end). ``memory=False`` resumes a
        sandbox paused with its memory by starting it afresh on its files (E2B
        ``on_resume="reboot"``); ``on_timeout`` replaces what its timeout does, once it
        runs again."""
        if sbx.held == CAP_HOLD and self.cap_gate is not None:
            self.cap_gate(sbx)
        if sbx.held is not None:
            raise Conflict(f"sandbox {sbx.sandbox_id!r} is held paused by the operator's "
                           "kill switch; it resumes once the operator releases it")
        check_transition(sbx.state, SandboxState.RUNNING)
        kind = sbx.paused_as
        began = time.monotonic()
        if isinstance(self._backend, Checkpointable):
            # wake() continues any kind of pause; the spec is for a fresh start.
            spec = await spec_of(self._templates, sbx)
            try:
                endpoint = await self._backend.wake(spec, memory=memory)
            except (NodeUnreachable, NoCapacity) as exc:
                # Several machines: its node is lost and no other can take it over now.
                raise OutOfCapacity(f"resuming sandbox {sbx.sandbox_id!r}: {exc}") from exc
            except CheckpointFailed as exc:
                log.warning("resuming %s failed: %s", sbx.sandbox_id, exc)
                await self._sandbox_store.add_event(event(
                    sbx.sandbox_id, sbx.team_id, EventKind.RESUME_FAILED,
                    "resume failed: the saved state could not be restored; still paused",
                    level="error", mode=kind.value if kind is not None else "",
                    memory=str(memory).lower()))
                raise ResumeFailed(
                    f"resuming sandbox {sbx.sandbox_id!r} failed: its saved state could not "
                    "be restored; it stays paused (resuming without its memory, E2B "
                    "on_resume='reboot', starts it afresh on its files)") from exc
        elif isinstance(self._backend, Pausable):
            endpoint = await self._backend.resume(sbx.sandbox_id)
        else:
            raise NotSupported(f"the {self._backend.name!r} backend cannot resume it")
        took = time.monotonic() - began
        if self._observer is not None and kind is not None:
            self._observer.resumed(kind.value, took)
        sbx.state, sbx.paused_as, sbx.saved_bytes = SandboxState.RUNNING, None, 0
        sbx.attach(endpoint.address, endpoint.envd_port)
        now = self._clock.now()
        sbx.end_at = NO_END if seconds is None else now + timedelta(seconds=seconds)
        sbx.last_active = now
        if on_timeout is not None:
            sbx.on_timeout = on_timeout
        self._registry.update(sbx)
        await self._sandbox_store.update_sandbox(
            sbx.sandbox_id, state=sbx.state.value, end_at=sbx.end_at,
            lifecycle=sbx.lifecycle(),
            event=event(sbx.sandbox_id, sbx.team_id, EventKind.RESUMED, message,
                        mode=kind.value if kind is not None else "",
                        memory=str(memory).lower(), duration_ms=f"{took * 1000:.1f}"))
        self._arm(sbx)

    async def wake_for_traffic(self, sandbox_id: str) -> Route | None:
        """The route to a sandbox a request is for, resuming it first if it is paused with
        auto-resume on (the gateway calls this when it finds no route)."""
        sbx = self._registry.get(sandbox_id)
        if sbx is None or not sbx.auto_resume:
            return None
        async with sbx.lock:
            if sbx.state is SandboxState.PAUSED:
                try:
                    if sbx.held == CAP_HOLD and self.cap_gate is not None:
                        self.cap_gate(sbx)
                except CapReached:
                    return None
                if sbx.held is not None:
                    return None
                try:
                    await self.resume(sbx, seconds=sbx.timeout_s or None,
                                      message="resumed by traffic (auto-resume)")
                except Exception:
                    log.exception("auto-resume of %s failed", sandbox_id)
                    return None
        return self._registry.route(sandbox_id)
