"""Paused sandboxes and checkpoints written through to the disk, after the call returns.

A suspend or a checkpoint returns as soon as CRIU and ``cp`` have handed their data to the
page cache; the kernel writes it out up to ~30 s later (``vm.dirty_expire_centisecs``),
so a power loss or kernel crash in that window would lose a pause that was reported
done. Waiting for the disk on the pause's own path would cost more than the dump itself
(64 MiB of images), so a ``Flusher`` does it right after, off the event loop.

**How: one ``syncfs(2)`` per file system, not ``fsync`` per file.** What must reach the
disk is the images, the directories naming them, the slot record (written by rename) and
the sandbox's own files — the overlay's upper layer, whose every file the user may have
written just before the pause. The upper layer can hold tens of thousands of files:
walking it and calling ``fsync`` on each costs a syscall, and on ext4 often a journal
commit, per file. ``syncfs`` on a directory writes back every dirty page and inode of its
file system, then commits the journal and flushes the device cache once: everything
above in one call, renames included, and since Linux 5.8 it reports writeback errors.
It also writes other dirty data of that file system, which the kernel would write within
the same 30 s anyway; only the moment moves. Python 3.11 has no ``os.syncfs``: glibc's,
through ctypes.

**When.** Requests queue; one worker runs them in batches, one thread (``to_thread``)
and one ``syncfs`` per file system per batch, so pausing a hundred sandboxes at once
costs a few ``syncfs`` calls, not a hundred, and never holds more than one of the
default executor's threads. A batch covers every request made before it started.

**Racing the sandbox's next step.** A wake, a roll-back or a destroy never waits for the
flush: the flush holds only directory descriptors, opened when its batch starts (a path
already renamed away by ``_discard.set_aside`` or deleted is skipped; nothing of it then
needs to survive), and ``syncfs`` writes what exists when it runs; a file deleted under it
is fine. ``close()`` of the backend waits for pending batches, bounded like teardowns.

How long a flush took is logged at debug level for each sandbox or checkpoint.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

_log = logging.getLogger(__name__)
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def syncfs(fd: int) -> None:
    """Write back everything of the file system holding ``fd``, and wait (blocking)."""
    if _libc.syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"syncfs: {os.strerror(err)}")


def sync_file_systems(paths: list[Path]) -> int:
    """``syncfs`` once on each file system holding one of ``paths`` (those that still
    exist); returns how many. Blocking; raises the first ``OSError`` of a ``syncfs``."""
    by_device: dict[int, int] = {}
    try:
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError):
                continue  # renamed away or deleted since: no longer needed on disk
            device = os.fstat(fd).st_dev
            if device in by_device:
                os.close(fd)
            else:
                by_device[device] = fd
        for fd in by_device.values():
            syncfs(fd)
    finally:
        for fd in by_device.values():
            os.close(fd)
    return len(by_device)


@dataclass
class _Request:
    name: str
    paths: tuple[Path, ...]
    done: asyncio.Future[None]
    since: float = field(default_factory=time.monotonic)


class Flusher:
    """The background flushes of one backend (one event loop)."""

    def __init__(self, tasks: set[asyncio.Future[None]]) -> None:
        # ``tasks``: where the backend keeps work that close() waits for (bounded).
        self._tasks = tasks
        self._queue: list[_Request] = []
        self._worker: asyncio.Future[None] | None = None
        self._pending: dict[str, asyncio.Future[None]] = {}

    def request(self, name: str, *paths: Path) -> None:
        """Have ``paths`` (directories) and everything on their file systems written to
        disk soon; ``name`` (e.g. "sandbox <id>") is for ``flushed`` and the log.
        Returns at once."""
        done = asyncio.get_running_loop().create_future()
        self._queue.append(_Request(name, paths, done))
        self._pending[name] = done

        def forget(_: asyncio.Future[None]) -> None:
            if self._pending.get(name) is done:
                del self._pending[name]

        done.add_done_callback(forget)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._work())
            self._tasks.add(self._worker)
            self._worker.add_done_callback(self._tasks.discard)

    async def flushed(self, name: str) -> None:
        """Wait until the last flush requested for ``name`` has finished (a failure is
        logged, not raised); at once if none is pending."""
        done = self._pending.get(name)
        if done is not None:
            await asyncio.shield(done)

    async def _work(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            paths = [path for request in batch for path in request.paths]
            try:
                # Runs to the end even if this task is cancelled: the thread cannot be.
                count = await asyncio.shield(asyncio.to_thread(sync_file_systems, paths))
            except Exception as exc:  # logged, never raised: nobody awaits this task
                _log.error("writing %s to disk failed; they may not survive a host crash: %s",
                           ", ".join(r.name for r in batch), exc)
            else:
                now = time.monotonic()
                for request in batch:
                    _log.debug("%s on disk %.0f ms after it was taken (%d file system(s))",
                               request.name, (now - request.since) * 1000, count)
            finally:
                for request in batch:
                    if not request.done.done():
                        request.done.set_result(None)


class DurableMixin:
    """Mixed into the backend: its flusher, and waiting for it."""

    _teardowns: set[asyncio.Future[None]]
    _flusher: Flusher | None = None

    @property
    def _flushes(self) -> Flusher:
        if self._flusher is None:
            self._flusher = Flusher(self._teardowns)  # close() waits for these, bounded
        return self._flusher

    async def suspend_flushed(self, sandbox_id: str) -> None:
        """Wait until the sandbox's last suspend is on disk (at once if it is)."""
        await self._flushes.flushed(f"sandbox {sandbox_id}")

    async def checkpoint_flushed(self, checkpoint_id: str) -> None:
        """Wait until the checkpoint is on disk (at once if it is)."""
        await self._flushes.flushed(f"checkpoint {checkpoint_id}")
