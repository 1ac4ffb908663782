"""Steps that run to the end whatever happens to their caller.

Much of the server makes and removes host resources: a step cut short by a cancelled
caller (a client gone, a server stopping) would leave a half-made mount, netns, layer or
process behind its teardown. So such steps are awaited through ``to_the_end``, blocking
file work goes to a thread the same way (``off_loop``), and a child process is killed
and reaped the same way (``end_child``): a cancelled caller still sees its cancellation,
after the step has finished. Every layer may import this module; it imports nothing of
the server.

Not for a caller that must not wait: one waiting on a task others share (a pool's
refill, a flush) or on a lock that may be held for long shields it with a bare
``asyncio.shield`` and goes on with its cancellation at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def to_the_end(step: Awaitable[T]) -> T:
    """Await ``step``; if the caller is cancelled (once or more), let the step finish
    before re-raising, so a teardown never races a half-done step or is cut short."""
    task = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: the caller sees its own cancellation
        raise


async def off_loop(fn: Callable[[], T]) -> T:
    """Run blocking file work in a thread, to the end (see ``to_the_end``)."""
    return await to_the_end(asyncio.to_thread(fn))


async def end_child(proc: asyncio.subprocess.Process) -> None:
    """Kill ``proc`` if it still runs and reap it, to the end (see ``to_the_end``): a
    child never goes on writing into what its cancelled or failed caller tears down."""
    if proc.returncode is None:
        proc.kill()
    await to_the_end(proc.wait())



async def cancel_and_wait(task: asyncio.Future[Any] | None) -> None:
    """Cancel a background task the caller owns (a refill loop, a sweep) and wait until it
    has ended. For closing: a cancellation of the caller while it waits is absorbed with
    the task's own, so the rest of the caller's closing still runs."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
