"""One request's round trip through a kernel: its messages routed until the kernel is done.

A request is done when the kernel's iopub says idle for it *and* its reply arrived (the
two come on different channels, in either order). Every wait here ends:

- the kernel must take the request (any message naming it; kernels say `busy` first)
  within `kernel.ack_timeout` seconds. Until it does it is nudged every `TICK` seconds
  with a no-op request (a request that reached a ZeroMQ socket while that socket's wake-up
  was being consumed is read only when the next message arrives), and past the timeout
  it is killed as wedged;
- once one half (reply or idle) is in, the other must follow within `COMPLETION_TIMEOUT`,
  nudged meanwhile: a lost idle ends the request with the reply in hand; a lost reply
  means the shell channel is broken, and the kernel is killed;
- an abandoned interruptible request is interrupted, and the kernel killed if it ignores
  that for `ABANDON_GRACE` seconds;
- a process gone without an exit notice is noticed at the next tick.

A limit passes only when both that much time and that many ticks went by, so a sandbox
paused or restored from a checkpoint mid-wait is not taken for a wedged kernel.

Only the user's code runs as long as it likes, bounded by the client's own timeout (a
disconnect abandons the request). A kill ends the request at once with None, as a death
does; the context then restarts the kernel.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from typing import Any

from bac_kernel._inbox import Abandoned, Incoming, KernelExited
from bac_kernel._kernel import Kernel

ABANDON_GRACE = 5.0
COMPLETION_TIMEOUT = 30.0
TICK = 2.0

Reply = dict[str, Any]
OnOutput = Callable[[Incoming], None]

_log = logging.getLogger(__name__)


class _After(enum.Enum):
    """What a tick decided."""

    WAIT = "wait"
    DONE = "done"  # return the reply in hand
    GONE = "gone"  # the kernel is gone (or was killed here): return None


async def round_trip(
    kernel: Kernel, send: Callable[[], str], on_output: OnOutput | None, *, interruptible: bool
) -> Reply | None:
    """Send a request with `send`, hand the kernel's iopub output for it to `on_output`
    until it is done, and return the reply's content; None if the kernel died first."""
    generation = kernel.generation
    msg_id = send()
    # Set before the first await, so no message of `msg_id` can be dropped.
    kernel.collecting = True
    try:
        return await _RoundTrip(kernel, msg_id, generation, on_output, interruptible).run()
    finally:
        kernel.collecting = False


class _RoundTrip:
    def __init__(
        self,
        kernel: Kernel,
        msg_id: str,
        generation: int,
        on_output: OnOutput | None,
        interruptible: bool,
    ) -> None:
        self._kernel = kernel
        self._msg_id = msg_id
        self._generation = generation
        self._on_output = on_output
        self._interruptible = interruptible
        self._clock = asyncio.get_running_loop().time
        self._acked = False
        self._idle = False
        self._reply: Reply | None = None
        self._half_done = False
        self._abandon_deadline: float | None = None
        self._next_tick_at = self._clock() + TICK
        # The wait for the kernel's next owed message (ack, or the other half): when it
        # began, and the ticks seen since. Both must pass a limit before a kill, so a
        # sandbox paused (or restored) mid-wait does not look like a wedged kernel.
        self._owed_since = self._clock()
        self._owed_ticks = 0

    async def run(self) -> Reply | None:
        while not (self._idle and self._reply is not None):
            try:
                item = await asyncio.wait_for(self._kernel.inbox.get(), self._next_tick())
            except TimeoutError:
                after = self._tick()
                if after is _After.GONE:
                    return None
                if after is _After.DONE:
                    return self._reply
                continue
            if isinstance(item, Abandoned):
                if self._interruptible and self._abandon_deadline is None:
                    await self._kernel.interrupt()
                    self._abandon_deadline = self._clock() + ABANDON_GRACE
            elif isinstance(item, KernelExited):
                if item.generation == self._generation:
                    return None
            elif item.parent_id == self._msg_id:
                self._take(item)
        return self._reply

    def _next_tick(self) -> float:
        due = self._next_tick_at
        if self._abandon_deadline is not None:
            due = min(due, self._abandon_deadline)
        return max(0.0, due - self._clock())

    def _take(self, item: Incoming) -> None:
        self._acked = True
        if item.channel == "shell":
            if item.msg_type == "execute_reply":
                self._reply = item.msg["content"]
                self._one_half_in()
        elif item.msg_type == "status":
            if item.msg["content"].get("execution_state") == "idle":
                self._idle = True
                self._one_half_in()
        elif self._on_output is not None:
            self._on_output(item)

    def _one_half_in(self) -> None:
        if not self._half_done:
            self._half_done = True
            self._owed_since, self._owed_ticks = self._clock(), 0

    def _overdue(self, limit: float, now: float) -> bool:
        return self._owed_ticks * TICK >= limit and now - self._owed_since >= limit

    def _tick(self) -> _After:
        """Enforce the deadlines, and nudge a kernel that owes us a message."""
        kernel, now = self._kernel, self._clock()
        self._next_tick_at = now + TICK
        if not kernel.is_alive():
            return _After.GONE
        if self._abandon_deadline is not None and now >= self._abandon_deadline:
            return self._kill("the kernel ignored the interrupt")
        if self._acked and not self._half_done:
            return _After.WAIT  # the user's code runs; only the client's timeout bounds it
        self._owed_ticks += 1
        if not self._acked:
            if self._overdue(kernel.ack_timeout, now):
                return self._kill(
                    f"the kernel did not take the request within {kernel.ack_timeout:g} s; "
                    "it was restarted and its state is lost"
                )
        elif self._overdue(COMPLETION_TIMEOUT, now):
            if self._reply is None:
                return self._kill(
                    "the kernel finished the request but its reply never arrived; "
                    "it was restarted and its state is lost"
                )
            _log.warning("no idle status from the %s kernel %g s after its reply",
                         kernel.language.name, COMPLETION_TIMEOUT)
            return _After.DONE
        kernel.nudge()
        return _After.WAIT

    def _kill(self, reason: str) -> _After:
        _log.warning("killing the %s kernel: %s", self._kernel.language.name, reason)
        self._kernel.exit_reason = reason
        self._kernel.kill()
        return _After.GONE
