"""Paused sandboxes and checkpoints written through to the disk, after the call returns.

A suspend or a checkpoint returns as soon as CRIU and ``cp`` have handed their data to the
page cache; the kernel writes it out up to ~30 s later (``vm.dirty_expire_centisecs``),
so a power loss or kernel crash in that window would lose a pause that was reported
done. Waiting for the disk on the pause's own path would more than double its time at
64 MiB (~200 ms of flush here), so a ``Flusher`` does it right after, off the event
loop, in one worker thread.

**What and how.** What must reach the disk: the images, the directories naming them, the
slot record (written by rename), and the sandbox's own files — the overlay's upper layer,
whose every file the user may have written just before the pause. Two steps per batch:

1. The large files of the images (a checkpoint: of its whole directory, the copied files
   too) are written a few MiB at a time (``_writeback.write_back``). Handed to the disk
   all at once, as ``syncfs`` or ``fsync`` do, 64 MiB of images made every other
   synchronous write on the disk wait behind them: a wake right after a pause took
   ~200 ms instead of ~65. In chunks, nobody waits behind more than a few MiB.
2. One ``syncfs(2)`` per file system then writes what is left — small files, the upper
   layer, inodes, directories — commits the journal and flushes the device cache, and
   reports writeback errors (Linux >= 5.8). Not ``fsync`` per file: the upper layer can
   hold tens of thousands of files, and ``fsync`` costs a syscall and often a journal
   commit each, where ``syncfs`` is one call. It also writes other dirty data of the file
   system, which the kernel would write within the same 30 s anyway.

**Batches.** Requests made while a batch runs form the next one, with one ``syncfs`` per
file system for all of it: pausing a hundred sandboxes at once costs a few ``syncfs``
calls, and the flusher never holds more than one of the default executor's threads.

**Yielding.** Pauses, wakes, checkpoints and copies hold ``Flusher.busy`` while they run;
before each chunk and the ``syncfs`` the flusher waits until none does, up to
``YIELD_S``, so they do not compete for the disk and the CPUs (a 64 MiB pause while
another sandbox's flush ran took ~230 ms instead of ~140). A steady stream of them
slows a flush to a chunk per ``YIELD_S``, never stops it. What remains: a call that
starts while the ``syncfs`` runs waits for the disk's cache flush inside it (~100 ms
after 64 MiB on the reference VM, whose virtual disk then persists on its host): a wake
0.1 s after a 64 MiB pause took ~140 ms instead of ~100 (interleaved A/B).

**Racing the sandbox's next step.** Nothing waits for a flush. A wake or a roll-back
``drop``s its suspend's flush, which stops at the next chunk (the images are garbage
now: no point writing them); a file deleted under it (a destroy, a deleted checkpoint)
stops it too, and paths renamed away or deleted are skipped. ``close()`` of the backend
waits for pending batches, bounded like teardowns. How long each flush took is logged
at debug level.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ._writeback import large_files, sync_file_systems, write_back

_log = logging.getLogger(__name__)
# How long the flusher waits, before each chunk, for running operations to finish: it
# yields to them, but is never starved by a steady stream of them.
YIELD_S = 1.0


@dataclass
class _Request:
    name: str
    files: Path  # the tree whose large files are written in chunks
    paths: tuple[Path, ...]  # directories whose file systems get a ``syncfs``
    done: asyncio.Future[None]
    since: float = field(default_factory=time.monotonic)
    dropped: bool = False  # read by the worker thread between chunks

    def wanted(self) -> bool:
        return not self.dropped


class Flusher:
    """The background flushes of one backend (one event loop)."""

    def __init__(self, tasks: set[asyncio.Future[None]]) -> None:
        # ``tasks``: where the backend keeps work that close() waits for (bounded).
        self._tasks = tasks
        self._queue: list[_Request] = []
        self._worker: asyncio.Future[None] | None = None
        self._pending: dict[str, _Request] = {}
        self._busy = 0  # pauses, wakes and checkpoints running; guarded by ``_quiet``
        self._quiet = threading.Condition()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Around a pause, wake or checkpoint: the flusher waits until none runs (up to
        ``YIELD_S`` per chunk), so they do not share the disk and CPUs with it."""
        with self._quiet:
            self._busy += 1
        try:
            yield
        finally:
            with self._quiet:
                self._busy -= 1
                self._quiet.notify_all()

    def _pace(self) -> None:
        """Worker thread: before each chunk, let running operations finish first."""
        with self._quiet:
            self._quiet.wait_for(lambda: self._busy == 0, timeout=YIELD_S)

    def _flush(self, batch: list[_Request]) -> int:
        """Worker thread: the batch's large files in chunks, then one ``syncfs`` per file
        system (none if every request was dropped); returns how many file systems."""
        for request in batch:

            def go(request: _Request = request) -> bool:
                self._pace()
                return request.wanted()

            for path in large_files(request.files) if request.wanted() else ():
                if not write_back(path, go):
                    break
        paths = [p for r in batch if r.wanted() for p in (r.files, *r.paths)]
        if paths:
            self._pace()
        return sync_file_systems(paths)

    def request(self, name: str, files: Path, *paths: Path) -> None:
        """Have the tree ``files`` and everything on its file system and on those of
        ``paths`` (directories) written to disk soon; ``name`` (e.g. "sandbox <id>") is
        for ``flushed``, ``drop`` and the log. Returns at once."""
        request = _Request(name, files, paths, asyncio.get_running_loop().create_future())
        self._queue.append(request)
        self._pending[name] = request

        def forget(_: asyncio.Future[None]) -> None:
            if self._pending.get(name) is request:
                del self._pending[name]

        request.done.add_done_callback(forget)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._work())
            self._tasks.add(self._worker)
            self._worker.add_done_callback(self._tasks.discard)

    def drop(self, name: str) -> None:
        """What ``name``'s pending flush would write is no longer needed on disk."""
        request = self._pending.get(name)
        if request is not None:
            request.dropped = True

    def pending(self, name: str) -> bool:
        """Whether a flush requested for ``name`` has not finished yet."""
        return name in self._pending

    async def flushed(self, name: str) -> None:
        """Wait until the last flush requested for ``name`` has finished (or stopped,
        dropped; a failure is logged, not raised); at once if none is pending."""
        request = self._pending.get(name)
        if request is not None:
            await asyncio.shield(request.done)

    async def _work(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                # Runs to the end even if this task is cancelled: the thread cannot be.
                count = await asyncio.shield(asyncio.to_thread(self._flush, batch))
            except Exception as exc:  # logged, never raised: nobody awaits this task
                _log.error("writing %s to disk failed; they may not survive a host crash: %s",
                           ", ".join(r.name for r in batch if r.wanted()), exc)
            else:
                now = time.monotonic()
                for request in batch:
                    _log.debug("%s %s %.0f ms after it was taken (%d file system(s))",
                               request.name, "on disk" if request.wanted() else "dropped",
                               (now - request.since) * 1000, count)
            finally:
                for request in batch:
                    if not request.done.done():
                        request.done.set_result(None)
