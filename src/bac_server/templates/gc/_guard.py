"""The lock between template builds and the garbage collector, across processes.

``<root>/templates/.gc.lock``: every build holds it shared for its whole run (a build may
take a layer from the cache that nothing references yet, and name it in its manifest only
at the end); a collection takes it exclusively, without waiting, before it moves anything
to the trash. So a collection never runs while a build does, and a build that starts
meanwhile waits only for the moves (the deletion itself happens after the lock is
released, on entries no one can see any more).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from .._flock import locked

GUARD = ".gc.lock"


def guard_path(root: Path) -> Path:
    return root / "templates" / GUARD


def _guard_file(root: Path) -> Path:
    path = guard_path(root)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@contextlib.asynccontextmanager
async def build_guard(root: Path) -> AsyncIterator[None]:
    """Hold the guard shared (a build); waits while a collection moves entries."""
    async with locked(await asyncio.to_thread(_guard_file, root), fcntl.LOCK_SH):
        yield


@contextlib.contextmanager
def collection_guard(root: Path) -> Iterator[bool]:
    """Try to hold the guard exclusively (a collection); yields whether it got it. Never
    waits: a build or another collection in progress means "not now"."""
    fd = os.open(_guard_file(root), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on ``path`` (an entry's build lock), or None when
    someone holds it. The lock file is made if missing (it is what builders open)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        return None  # no lock directory: nothing was ever built here
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
