"""The operator's kill switch: pause or kill every sandbox a selector matches, at once.

A switch stops spending first and saves afterwards:

1. **freeze**: every matching running sandbox's cgroup is frozen (the backend's freezer
   pause), at most ``concurrency`` at a time, each under its own lock; the gateway stops
   routing to it before its processes stop. A pause then writes its row (paused, held,
   the event with reason ``kill switch``) and the call answers;
2. **save**, in the background: a pause writes each frozen sandbox to disk with its memory
   (the ordinary pause-to-disk path: CRIU, then the background write-through), so it
   survives a restart and frees its memory; a kill ends each one (the lifecycle's end:
   its row, its event, the backend's destroy).

A sandbox paused by the switch is *held*: neither its team (resume, connect) nor traffic
(auto-resume) can resume it until the operator releases it (``release``, same selectors);
released, it is an ordinary paused sandbox. A switch cut short by a server restart leaves
frozen sandboxes paused (the re-attach trusts the backend's view), never running.

The same freeze-then-save pause serves others that must stop spending at once: a cost cap
pauses the sandboxes it covers through :meth:`KillSwitch.freeze`, with its own hold (the
cap's gate, not the operator, lets them resume) and its own reason in the events.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from bac_server.backends.base import (
    Backend,
    BackendError,
    Checkpointable,
    FleetPausable,
    Pausable,
    PauseKind,
)
from bac_server.store import SandboxChange, SandboxStore

from ..errors import InvalidRequest, NotSupported
from ._events import EndReason, EventKind, event
from ._lifecycle import Lifecycle
from ._registry import LiveSandbox, Registry
from ._states import SandboxState

log = logging.getLogger(__name__)

HOLD = "kill_switch"  # what holds a sandbox the switch paused (``LiveSandbox.held``)
_MAX_SELECTOR_ENTRIES = 64
_SLOW_S = 0.25  # a freeze slower than this is logged, with where its time went
_LOCK_WAIT_S = 0.05  # a lock busy longer than this: that sandbox is frozen on its own


@dataclass(frozen=True)
class Selector:
    """Which sandboxes a switch acts on: ``everything``, or those matching every filter
    given (a team, metadata pairs, a template by id or alias). No filter and not
    ``everything`` is refused: a switch never acts on the whole fleet by omission."""

    everything: bool = False
    team: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    template: str | None = None

    def __post_init__(self) -> None:
        filtered = self.team is not None or bool(self.metadata) or self.template is not None
        if self.everything and filtered:
            raise InvalidRequest("a selector is either all or filters (team, metadata, "
                                 "template), not both")
        if not self.everything and not filtered:
            raise InvalidRequest("a selector needs all: true or at least one of team, "
                                 "metadata, template")
        if len(self.metadata) > _MAX_SELECTOR_ENTRIES:
            raise InvalidRequest(f"a selector has at most {_MAX_SELECTOR_ENTRIES} "
                                 "metadata pairs")
        for value in (self.team, self.template):
            if value is not None and not value:
                raise InvalidRequest("team and template must not be empty")

    def matches(self, sbx: LiveSandbox) -> bool:
        if self.everything:
            return True
        if self.team is not None and sbx.team_id != self.team:
            return False
        if self.template is not None and self.template not in (sbx.template_id, sbx.alias):
            return False
        return all(sbx.metadata.get(k) == v for k, v in self.metadata.items())


@dataclass(frozen=True)
class SwitchResult:
    """What a switch did: the sandboxes it acted on (ids, sorted), those it could not act
    on (id: why), how long the freeze of all of them took, and the pause they got
    (``disk`` once written, ``freezer`` where memory cannot be saved; None for a kill
    and a release)."""

    action: str
    sandbox_ids: list[str]
    failed: dict[str, str]
    frozen_ms: float
    mode: str | None = None


class KillSwitch:
    def __init__(self, *, backend: Backend, sandbox_store: SandboxStore, registry: Registry,
                 lifecycle: Lifecycle, concurrency: int = 32,
                 background_concurrency: int = 4) -> None:
        """``concurrency``: freezes at once; ``background_concurrency``: writes to disk or
        ends at once afterwards (each a CRIU dump or a teardown and a commit: more at
        once only queue on the CPUs, the disk and the store's write lock)."""
        if concurrency < 1 or background_concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._backend = backend
        self._sandbox_store = sandbox_store
        self._registry = registry
        self._lifecycle = lifecycle
        self._concurrency = concurrency
        self._background_concurrency = background_concurrency
        self._background: set[asyncio.Task[None]] = set()

    @property
    def freezes(self) -> bool:
        """Whether this backend can freeze sandboxes (else no switch can pause)."""
        return isinstance(self._backend, Pausable)

    # -- the switch -------------------------------------------------------------------------

    async def pause(self, selector: Selector) -> SwitchResult:
        """Freeze every matching running sandbox, hold it paused, answer; then write each
        to disk with its memory in the background."""
        return await self.freeze(
            self._matching(selector, SandboxState.RUNNING), hold=HOLD,
            reason=EndReason.KILL_SWITCH,
            message="paused by the kill switch (frozen; its state is written to disk next)")

    async def freeze(self, sandboxes: Iterable[LiveSandbox], *, hold: str,
                     reason: EndReason, message: str) -> SwitchResult:
        """Freeze each of ``sandboxes`` still running, hold it paused with ``hold``,
        write its row (event ``paused`` with ``message`` and ``reason``), answer; then
        write each to disk with its memory in the background."""
        to_disk = self._disk_pause()
        began = time.perf_counter()
        frozen, failed = await self._freeze_all(sandboxes, keep_locked=True, hold=hold)
        frozen_ms = (time.perf_counter() - began) * 1000
        try:
            # Their rows in one commit (one each would wait on the disk once each).
            await self._sandbox_store.update_sandboxes([SandboxChange(
                s.sandbox_id, s.state.value, s.lifecycle(),
                event(s.sandbox_id, s.team_id, EventKind.PAUSED, message,
                      mode=PauseKind.FREEZER.value, reason=reason.value)) for s in frozen])
        finally:
            _release(frozen)
            if to_disk:  # written to disk even if their rows could not be
                self._spawn(self._each(frozen, self._save))
        return SwitchResult("pause", sorted(s.sandbox_id for s in frozen), failed,
                            round(frozen_ms, 3), "disk" if to_disk else "freezer")

    async def kill(self, selector: Selector) -> SwitchResult:
        """Freeze every matching running sandbox, answer; then end each matching one
        (running or paused) in the background."""
        matching = self._matching(selector, SandboxState.RUNNING, SandboxState.PAUSED)
        began = time.perf_counter()
        if isinstance(self._backend, Pausable):
            # One that could not be frozen is ended all the same: a kill needs no freeze.
            await self._freeze_all([s for s in matching if s.state is SandboxState.RUNNING],
                                   keep_locked=False, hold=HOLD)
        frozen_ms = (time.perf_counter() - began) * 1000
        for sbx in matching:
            sbx.held = HOLD  # nothing resumes it before its end
        self._spawn(self._each(matching, self._end))
        return SwitchResult("kill", sorted(s.sandbox_id for s in matching), {},
                            round(frozen_ms, 3))

    async def release(self, selector: Selector) -> SwitchResult:
        """Let the team (and traffic) resume the matching sandboxes the switch holds; they
        stay paused until then."""
        held = [s for s in self._matching(selector, SandboxState.PAUSED) if s.held == HOLD]
        locked: list[LiveSandbox] = []
        try:
            for sbx in held:
                await sbx.lock.acquire()
                locked.append(sbx)
            released = [s for s in locked
                        if s.held == HOLD and s.state is SandboxState.PAUSED]
            for sbx in released:
                sbx.held = None
            await self._sandbox_store.update_sandboxes([SandboxChange(
                s.sandbox_id, s.state.value, s.lifecycle()) for s in released])
        finally:
            _release(locked)
        return SwitchResult("release", sorted(s.sandbox_id for s in released), {}, 0.0)

    async def settled(self) -> None:
        """Wait until the background work of every switch so far is done (paused ones on
        disk, killed ones ended)."""
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    async def close(self) -> None:
        """At shutdown: finish what was started (a pause's state reaches the disk)."""
        await self.settled()

    # -- the steps --------------------------------------------------------------------------

    def _disk_pause(self) -> bool:
        backend = self._backend
        if not isinstance(backend, Pausable):
            raise NotSupported(f"the {backend.name!r} backend cannot freeze sandboxes")
        return isinstance(backend, Checkpointable) and backend.memory_checkpoints

    def _matching(self, selector: Selector, *states: SandboxState) -> list[LiveSandbox]:
        return [s for s in self._registry.all() if s.state in states and selector.matches(s)]

    async def _freeze_all(self, sandboxes: Iterable[LiveSandbox], *, keep_locked: bool,
                          hold: str) -> tuple[list[LiveSandbox], dict[str, str]]:
        """Freeze each; with ``keep_locked`` the frozen ones' locks stay held for the
        caller to release (so that nothing changes them before their rows are written).

        A backend that freezes many at once (``FleetPausable``) gets every sandbox whose
        lock is free within a moment in one call; the rest (a lock held by a step in
        progress) are frozen one by one, ``concurrency`` at a time, once their lock is."""
        frozen: list[LiveSandbox] = []
        failed: dict[str, str] = {}
        rest = list(sandboxes)
        try:
            if isinstance(self._backend, FleetPausable):
                rest = await self._freeze_together(rest, frozen, failed, hold)
            await self._freeze_each(rest, frozen, failed, hold)
        except BaseException:
            _release(frozen)
            raise
        if not keep_locked:
            _release(frozen)
        return frozen, failed

    async def _freeze_together(self, sandboxes: list[LiveSandbox], frozen: list[LiveSandbox],
                               failed: dict[str, str], hold: str) -> list[LiveSandbox]:
        """One ``pause_all`` for those whose lock is free within ``_LOCK_WAIT_S``; returns
        the others. The frozen ones stay locked (in ``frozen``)."""
        assert isinstance(self._backend, FleetPausable)

        async def lock(sbx: LiveSandbox) -> bool:
            try:
                async with asyncio.timeout(_LOCK_WAIT_S):
                    await sbx.lock.acquire()
            except TimeoutError:
                return False
            return True

        got = await asyncio.gather(*(lock(s) for s in sandboxes))
        locked = [s for s, ok in zip(sandboxes, got, strict=True) if ok]
        later = [s for s, ok in zip(sandboxes, got, strict=True) if not ok]
        running = [s for s in locked if s.state is SandboxState.RUNNING]
        _release(s for s in locked if s.state is not SandboxState.RUNNING)
        for sbx in running:
            self._stop_routing(sbx, hold)
        try:
            refused = await self._backend.pause_all([s.sandbox_id for s in running])
        except Exception as exc:
            log.warning("kill switch: freezing %d sandboxes failed: %s", len(running), exc)
            refused = {s.sandbox_id: "it could not be frozen" for s in running}
        except BaseException:
            for sbx in running:
                self._route_again(sbx)
            _release(running)
            raise
        for sbx in running:
            if sbx.sandbox_id in refused:
                log.warning("kill switch: %s was not frozen: %s", sbx.sandbox_id,
                            refused[sbx.sandbox_id])
                self._route_again(sbx)
                failed[sbx.sandbox_id] = "it could not be frozen"
                sbx.lock.release()
            else:
                frozen.append(sbx)
        return later

    async def _freeze_each(self, sandboxes: list[LiveSandbox], frozen: list[LiveSandbox],
                           failed: dict[str, str], hold: str) -> None:
        gate = asyncio.Semaphore(self._concurrency)

        async def one(sbx: LiveSandbox) -> None:
            async with gate:
                began = time.perf_counter()
                await sbx.lock.acquire()
                locked = time.perf_counter()
                why: str | None = "ended or paused meanwhile"
                try:
                    if sbx.state is SandboxState.RUNNING:
                        why = await self._freeze(sbx, hold)
                    done = time.perf_counter()
                    if done - began > _SLOW_S:
                        log.warning("kill switch: %s took %.0f ms (%.0f waiting for its "
                                    "lock, %.0f freezing)", sbx.sandbox_id,
                                    (done - began) * 1000, (locked - began) * 1000,
                                    (done - locked) * 1000)
                finally:
                    if why is None:
                        frozen.append(sbx)
                    else:
                        sbx.lock.release()
                if why is not None and sbx.state is SandboxState.RUNNING:
                    failed[sbx.sandbox_id] = why

        await asyncio.gather(*(one(s) for s in sandboxes))

    def _stop_routing(self, sbx: LiveSandbox, hold: str) -> None:
        """Paused and held in the registry: the gateway stops routing to it at once, and
        paused it has no timer and no idle check."""
        sbx.state, sbx.paused_as, sbx.held = SandboxState.PAUSED, PauseKind.FREEZER, hold
        sbx.saved_bytes = 0
        self._registry.update(sbx)
        self._lifecycle.arm(sbx)

    def _route_again(self, sbx: LiveSandbox) -> None:
        sbx.state, sbx.paused_as, sbx.held = SandboxState.RUNNING, None, None
        sbx.saved_bytes = 0
        self._registry.update(sbx)
        self._lifecycle.arm(sbx)

    async def _freeze(self, sbx: LiveSandbox, hold: str) -> str | None:
        """Freeze one sandbox (its lock held); None when it is frozen, else why not."""
        assert isinstance(self._backend, Pausable)
        self._stop_routing(sbx, hold)
        try:
            await self._backend.pause(sbx.sandbox_id)
        except Exception as exc:
            log.warning("kill switch: freezing %s failed: %s", sbx.sandbox_id, exc)
            self._route_again(sbx)
            return "it could not be frozen"
        return None

    async def _save(self, sbx: LiveSandbox) -> None:
        """Write one frozen sandbox to disk with its memory (the backend's suspend, from
        its frozen state); one that failed stays frozen, still held."""
        assert isinstance(self._backend, Checkpointable)
        async with sbx.lock:
            if sbx.state is not SandboxState.PAUSED or sbx.paused_as is not PauseKind.FREEZER:
                return  # resumed after a release, or killed, meanwhile
            began = time.monotonic()
            try:
                written = await self._backend.suspend(sbx.sandbox_id, memory=True)
            except BackendError as exc:
                log.warning("kill switch: writing %s to disk failed; it stays frozen: %s",
                            sbx.sandbox_id, exc)
                return
            took = time.monotonic() - began
            sbx.paused_as, sbx.saved_bytes = PauseKind.DISK, written
            self._registry.update(sbx)
            await self._sandbox_store.update_sandbox(
                sbx.sandbox_id, lifecycle=sbx.lifecycle(),
                event=event(sbx.sandbox_id, sbx.team_id, EventKind.SAVED,
                            "its state was written to disk with its memory",
                            mode=PauseKind.DISK.value, duration_ms=f"{took * 1000:.1f}",
                            bytes=str(written)))

    async def _end(self, sbx: LiveSandbox) -> None:
        async with sbx.lock:
            if sbx.state not in (SandboxState.RUNNING, SandboxState.PAUSED):
                return
            await self._lifecycle.end(sbx, SandboxState.KILLED, EventKind.KILLED,
                                      "killed by the kill switch",
                                      reason=EndReason.KILL_SWITCH)

    async def _each(self, sandboxes: list[LiveSandbox],
                    step: Callable[[LiveSandbox], Awaitable[None]]) -> None:
        gate = asyncio.Semaphore(self._background_concurrency)

        async def one(sbx: LiveSandbox) -> None:
            async with gate:
                try:
                    await step(sbx)
                except Exception:
                    log.exception("kill switch: sandbox %s", sbx.sandbox_id)

        await asyncio.gather(*(one(s) for s in sandboxes))

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            await work

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _release(sandboxes: Iterable[LiveSandbox]) -> None:
    for sbx in sandboxes:
        sbx.lock.release()
