"""Holding a lock file from asyncio without ever leaking it to a cancelled waiter.

Every lock of template storage is one: the layer store's per key, the image cache's per
entry, the guard between builds and collections, the built-ins' build lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path


@contextlib.asynccontextmanager
async def locked(path: Path, operation: int = fcntl.LOCK_EX) -> AsyncIterator[None]:
    """Hold ``flock(path, operation)`` (LOCK_EX or LOCK_SH) for the block; the file is
    made (0600) if missing. Every holder opens its own file description, so the lock is
    exclusive between tasks of this process too. Tries at once, else waits in a thread;
    if the waiting task is cancelled, the file is closed once the thread gets the lock
    (which releases it) and the cancellation goes on."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        waiter = asyncio.ensure_future(asyncio.to_thread(fcntl.flock, fd, operation))
        try:
            await asyncio.shield(waiter)
        except BaseException:
            waiter.add_done_callback(lambda _: os.close(fd))
            raise
    try:
        yield
    finally:
        os.close(fd)
