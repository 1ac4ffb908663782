"""The registry's changes as a feed many readers follow (Mission Control's live fleet).

The registry calls one listener per change, synchronously, from the event loop; a reader
of this feed (a browser's event stream) comes and goes, and must never slow the
registry down. So the feed keeps, per subscription, the set of sandboxes changed since it
last read and an event to wake it: a change costs a set insert per subscription, nothing
is queued without bound, and a slow reader reads everything that changed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ._registry import LiveSandbox, Registry


@dataclass(frozen=True)
class Change:
    """One sandbox that was added, changed state or was removed."""

    sandbox_id: str
    team_id: str


@dataclass(eq=False)
class Subscription:
    """What changed since the last :meth:`wait`; ``closed`` once the feed closes."""

    _pending: dict[str, Change] = field(default_factory=dict)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False

    def _put(self, change: Change) -> None:
        self._pending[change.sandbox_id] = change
        self._wake.set()

    def _close(self) -> None:
        self.closed = True
        self._wake.set()

    async def wait(self, timeout_s: float) -> list[Change]:
        """The changes since the last call, waiting at most ``timeout_s`` for one (an
        empty list: none came in time, or the feed closed)."""
        if not self._pending and not self.closed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._wake.wait()
        self._wake.clear()
        changes = list(self._pending.values())
        self._pending.clear()
        return changes


class ChangeFeed:
    """Every change of the registry, to each subscription. Event loop only."""

    def __init__(self, registry: Registry) -> None:
        self._subscriptions: set[Subscription] = set()
        self._closed = False
        registry.on_change(self._changed)

    def _changed(self, sbx: LiveSandbox) -> None:
        change = Change(sbx.sandbox_id, sbx.team_id)
        for sub in self._subscriptions:
            sub._put(change)

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        sub = Subscription()
        if self._closed:
            sub._close()
        self._subscriptions.add(sub)
        try:
            yield sub
        finally:
            self._subscriptions.discard(sub)

    @property
    def subscribers(self) -> int:
        return len(self._subscriptions)

    def close(self) -> None:
        """Wake and close every subscription (the server is stopping: streams end)."""
        self._closed = True
        for sub in self._subscriptions:
            sub._close()
