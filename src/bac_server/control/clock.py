"""The control plane's clock: what time it is, and callbacks at a time.

Every lifetime decision (a sandbox's end, its idle pause) reads the time and schedules its
next step through a :class:`Clock`, so a simulation can run hours of sandbox life in no
time: :class:`SystemClock` is the wall clock and the event loop's timers (what the server
runs), :class:`ManualClock` a clock that moves only when told to (``advance``), firing
what fell due on the way, in order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Scheduled(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    def call_at(self, when: datetime, callback: Callable[[], None]) -> Scheduled:
        """Call ``callback`` once ``when`` is reached (at once when it has passed); from
        the event loop."""
        ...


async def sleep(clock: Clock, seconds: float) -> None:
    """Wait ``seconds`` on ``clock`` (a loop that repeats on the control plane's time)."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    scheduled = clock.call_at(clock.now() + timedelta(seconds=seconds), wake)
    try:
        await done
    finally:
        scheduled.cancel()


class SystemClock:
    """The wall clock; callbacks on the running event loop's timers."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def call_at(self, when: datetime, callback: Callable[[], None]) -> Scheduled:
        delay = (when - datetime.now(UTC)).total_seconds()
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)


class _Entry:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: datetime, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that stands still until :meth:`advance` moves it (simulations, tests).

    A callback whose time has already come runs at the next ``advance`` (``advance(0)``
    runs those alone), never from inside ``call_at``: the same order as the loop's timers.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start if start is not None else datetime.now(UTC)
        self._due: list[tuple[datetime, int, _Entry]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    def call_at(self, when: datetime, callback: Callable[[], None]) -> Scheduled:
        entry = _Entry(when, callback)
        heapq.heappush(self._due, (when, next(self._seq), entry))
        return entry

    def advance(self, seconds: float) -> int:
        """Move the time forward, calling each callback due by then at its own time;
        returns how many were called."""
        until = self._now + timedelta(seconds=seconds)
        called = 0
        while self._due and self._due[0][0] <= until:
            when, _, entry = heapq.heappop(self._due)
            if entry.cancelled:
                continue
            self._now = max(self._now, when)
            entry.callback()
            called += 1
        self._now = until
        return called
