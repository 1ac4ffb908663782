"""One lifecycle step at a time on a sandbox, in this process and across API replicas.

A step that changes a sandbox (create's end, pause, resume, kill, a timeout, a checkpoint,
a network change) holds its ``SandboxLock``: this process's lock, and with several API
replicas (docs/scale-out.md) a lease on the sandbox in the store as well, so that a
replica's timer and another replica's call never act on one sandbox at once (a pause
through one and a kill through the other would otherwise each write the row they saw
last). The lease (``Coordination.take_step``) is a row taken with one statement and given
back with another, so a step holds no database connection while it runs; it lasts
``LEASE_S`` and is renewed while the step goes on, so that a replica that dies mid-step
frees the sandbox at most ``LEASE_S`` later. A step that waits for another replica's
polls the row, sooner at first (``_WAIT_S``).

Following another replica's change of a sandbox (``_replicas``) takes only this process's
lock (``SandboxLock.here``): it changes nothing the others see.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType

from bac_server.store.coordination import Coordination

LEASE_S = 60.0
_RENEW_S = 20.0
_WAIT_S = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)

Across = Callable[[], AbstractAsyncContextManager[None]]
# Leases being given back after ``SandboxLock.release`` (kept from the collector).
_releasing: set[asyncio.Future[None]] = set()


class SandboxLock:
    """A sandbox's lock for its lifecycle steps (``async with sbx.lock``)."""

    def __init__(self) -> None:
        self.here = asyncio.Lock()
        # The lease across replicas, set by the registry that holds the sandbox when the
        # server runs among several (None: this process alone steps on it).
        self.across: Across | None = None
        self._held: AbstractAsyncContextManager[None] | None = None

    def locked(self) -> bool:
        return self.here.locked()

    async def acquire(self) -> None:
        """As ``async with``, for a holder that releases later (the kill switch)."""
        await self.__aenter__()

    def release(self) -> None:
        """Give back what ``acquire`` took; the lease is given back in the background,
        and this process's lock once it is (so that no step here starts meanwhile)."""
        held, self._held = self._held, None
        if held is None:
            self.here.release()
            return

        async def give_back() -> None:
            try:
                await held.__aexit__(None, None, None)
            finally:
                self.here.release()

        task = asyncio.ensure_future(give_back())
        _releasing.add(task)
        task.add_done_callback(_releasing.discard)

    async def __aenter__(self) -> None:
        await self.here.acquire()
        if self.across is None:
            return
        held = self.across()
        try:
            await held.__aenter__()
        except BaseException:
            self.here.release()
            raise
        self._held = held

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        held, self._held = self._held, None
        try:
            if held is not None:
                await held.__aexit__(kind, exc, tb)
        finally:
            self.here.release()


class StepLeases:
    """The leases on sandboxes' steps this replica takes in the store."""

    def __init__(self, coordination: Coordination) -> None:
        self._coordination = coordination
        # Called once a lease is taken, the sandbox's lock held: this replica's view of
        # the sandbox made its row's (another replica's step may have just changed it).
        self.on_taken: Callable[[str], Awaitable[None]] | None = None

    def across(self, sandbox_id: str) -> Across:
        return lambda: self._leased(sandbox_id)

    @contextlib.asynccontextmanager
    async def _leased(self, sandbox_id: str) -> AsyncIterator[None]:
        coordination = self._coordination
        waits = iter(_WAIT_S)
        # Polled: the lease is a row another replica gives back, no event reaches here.
        while not await coordination.take_step(sandbox_id, time.time() + LEASE_S):  # noqa: ASYNC110
            await asyncio.sleep(next(waits, _WAIT_S[-1]))
        renewing = asyncio.create_task(self._renew(sandbox_id))
        try:
            if self.on_taken is not None:
                await self.on_taken(sandbox_id)
            yield
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            # Given back even when the caller is cancelled (else it is held until it
            # expires); a store that fails here lets it expire.
            with contextlib.suppress(Exception):
                await asyncio.shield(coordination.end_step(sandbox_id))

    async def _renew(self, sandbox_id: str) -> None:
        while True:
            await asyncio.sleep(_RENEW_S)
            with contextlib.suppress(Exception):
                await self._coordination.take_step(sandbox_id, time.time() + LEASE_S)
