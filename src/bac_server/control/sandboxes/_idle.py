"""The idle policy: a running sandbox left alone is paused (or, when asked, ended).

A sandbox is idle once ``idle_after_s`` seconds have passed since its last activity (an API
call on it, a gateway request to it: :class:`._registry.Registry` keeps both) with no
gateway request in flight (a command's output stream, a download, a WebSocket) and its CPU
under ``idle_cpu_pct`` % of its vCPUs, measured over ``cpu_window_s`` of real time when the
idle time is up. One timer per sandbox on the control plane's clock, at its last activity
plus the idle time; when it fires on a sandbox still active or busy it is armed again from
then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from bac_server.backends.base import Backend, BackendError

from ..clock import Clock
from ._registry import LiveSandbox
from ._states import SandboxState

log = logging.getLogger(__name__)

# Called under the sandbox's lock with a sandbox found idle, and what to say of it.
IdleAction = Callable[[LiveSandbox, str], Awaitable[None]]


class IdleWatch:
    def __init__(self, *, backend: Backend, clock: Clock, act: IdleAction,
                 cpu_window_s: float = 1.0) -> None:
        self._backend = backend
        self._clock = clock
        self._act = act
        self._cpu_window_s = cpu_window_s
        self.tasks: set[asyncio.Task[None]] = set()

    def arm(self, sbx: LiveSandbox) -> None:
        """(Re)schedule the idle check of a running sandbox with an idle policy."""
        self.disarm(sbx)
        if sbx.state is not SandboxState.RUNNING or sbx.idle_after_s <= 0:
            return
        when = sbx.last_active + timedelta(seconds=sbx.idle_after_s)
        sbx.idle_timer = self._clock.call_at(when, lambda: self._fire(sbx))

    def disarm(self, sbx: LiveSandbox) -> None:
        if sbx.idle_timer is not None:
            sbx.idle_timer.cancel()
            sbx.idle_timer = None

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()

    def _fire(self, sbx: LiveSandbox) -> None:
        sbx.idle_timer = None
        task = asyncio.create_task(self._guarded(sbx))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _idle_for(self, sbx: LiveSandbox) -> bool:
        if sbx.state is not SandboxState.RUNNING or sbx.in_flight > 0:
            return False
        return self._clock.now() - sbx.last_active >= timedelta(seconds=sbx.idle_after_s)

    def _again(self, sbx: LiveSandbox, *, active_now: bool) -> None:
        if active_now:
            # Traffic in flight or a busy CPU is activity: the idle time starts again.
            sbx.last_active = max(sbx.last_active, self._clock.now())
        self.arm(sbx)

    async def _guarded(self, sbx: LiveSandbox) -> None:
        try:
            await self._check(sbx)
        except Exception:
            # A check that broke must not leave the sandbox without its policy.
            log.exception("the idle check of %s failed", sbx.sandbox_id)
            self._again(sbx, active_now=True)

    async def _check(self, sbx: LiveSandbox) -> None:
        if sbx.state is not SandboxState.RUNNING:
            return
        if not self._idle_for(sbx):
            self._again(sbx, active_now=sbx.in_flight > 0)
            return
        cpu = await self._cpu_pct(sbx)
        if cpu is None or cpu >= sbx.idle_cpu_pct:
            self._again(sbx, active_now=True)
            return
        async with sbx.lock:
            if not self._idle_for(sbx):  # traffic while the CPU was measured
                self._again(sbx, active_now=sbx.in_flight > 0)
                return
            try:
                await self._act(sbx, f"idle for {sbx.idle_after_s} s (no API or gateway "
                                     f"traffic, CPU {cpu:.1f} % < {sbx.idle_cpu_pct:g} %)")
            except Exception:
                log.exception("the idle action on %s failed; it keeps running", sbx.sandbox_id)
                self._again(sbx, active_now=True)

    async def _cpu_pct(self, sbx: LiveSandbox) -> float | None:
        """Its CPU use over the measuring window (the backend gives a rate since its last
        reading: one reading opens the window, the next closes it); None when unknown."""
        try:
            await self._backend.usage(sbx.sandbox_id)
            await asyncio.sleep(self._cpu_window_s)  # the measuring window, in real time
            return (await self._backend.usage(sbx.sandbox_id)).cpu_used_pct
        except BackendError as exc:
            log.info("no CPU reading of %s for its idle policy: %s", sbx.sandbox_id, exc)
            return None
