"""Waiting for a file lock from asyncio without ever leaking it to a cancelled waiter."""

from __future__ import annotations

import asyncio
import fcntl
import os


async def lock_fd(fd: int, operation: int) -> None:
    """Take ``flock(fd, operation)`` (LOCK_EX or LOCK_SH). Tries at once, else waits in a
    thread. If the waiting task is cancelled, ``fd`` is closed once the thread gets the
    lock (which releases it) and the cancellation goes on: the caller must then not close
    ``fd`` itself. On success the caller owns ``fd`` and closes it to release the lock."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    waiter = asyncio.ensure_future(asyncio.to_thread(fcntl.flock, fd, operation))
    try:
        await asyncio.shield(waiter)
    except BaseException:
        waiter.add_done_callback(lambda _: os.close(fd))
        raise
