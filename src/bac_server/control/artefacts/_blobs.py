"""Artefacts' bytes on disk: ``<root>/blobs/<sha256>``, each content once, published whole.

A blob is written to ``<root>/partial/`` as it arrives (hashed on the way), made durable
(``fsync``) and only then renamed to its hash's name (and the directory synced): a reader
finds a whole blob or none, never part of one, also after a crash. A partial file is a
write that never finished; :meth:`Blobs.sweep` removes them at start.

Rows name blobs by hash, so two rows (two runs, two teams) may share one; a blob goes
when the last row naming it does. :meth:`Blobs.holding` is the per-blob lock that makes
"publish and insert" and "delete and unlink if unnamed" exclusive (one server process owns
a data directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

from bac_server.host import sync_directory


class Partial:
    """One blob being written: its bytes so far, hashed."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._hash = hashlib.sha256()
        self.size = 0

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        await asyncio.to_thread(self._take, data)  # hashing a MiB is work too: off the loop

    def _take(self, data: bytes) -> None:
        self._hash.update(data)
        _write_all(self._fd, data)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    async def finish(self) -> None:
        """Durable on disk (before it may be published)."""
        await asyncio.to_thread(os.fsync, self._fd)

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Blobs:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._blobs = root / "blobs"
        self._partial = root / "partial"
        self._locks: dict[str, asyncio.Lock] = {}
        self._holders: dict[str, int] = {}

    def path(self, sha256: str) -> Path:
        return self._blobs / sha256

    async def start(self) -> None:
        def make() -> None:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            for folder in (self._blobs, self._partial):
                folder.mkdir(mode=0o700, exist_ok=True)

        await asyncio.to_thread(make)

    async def partial(self) -> Partial:
        path = self._partial / f"{secrets.token_hex(8)}.partial"
        fd = await asyncio.to_thread(
            os.open, path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
            0o600)
        return Partial(path, fd)

    async def publish(self, partial: Partial) -> Path:
        """Make the finished partial the blob of its hash (one already there is the same
        bytes: the partial is dropped). Hold :meth:`holding` of its hash."""
        final = self.path(partial.sha256)
        partial.close()

        def rename() -> None:
            if final.exists():
                partial.path.unlink(missing_ok=True)
                return
            os.replace(partial.path, final)
            sync_directory(self._blobs)

        await asyncio.to_thread(rename)
        return final

    async def remove(self, sha256: str) -> None:
        """Remove the blob (no row names it any more). Hold :meth:`holding` of its hash."""
        await asyncio.to_thread(self.path(sha256).unlink, True)

    @contextlib.asynccontextmanager
    async def holding(self, sha256: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(sha256, asyncio.Lock())
        self._holders[sha256] = self._holders.get(sha256, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._holders[sha256] -= 1
            if not self._holders[sha256]:
                del self._holders[sha256], self._locks[sha256]

    async def sweep(self) -> list[str]:
        """Remove partial writes a previous process left; returns the blobs' hashes."""
        def run() -> list[str]:
            for leftover in self._partial.iterdir():
                leftover.unlink(missing_ok=True)
            return sorted(p.name for p in self._blobs.iterdir())

        return await asyncio.to_thread(run)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


