"""Restoring memory lazily: a restored sandbox runs before all of its memory is back.

An eager restore copies every saved page into place before any process runs; on the
2-vCPU reference host each fresh page costs a fault in the VM (~2 ms per MiB), so a
sandbox holding 64 MiB waits over 100 ms for its memory alone. With lazy pages CRIU
registers the sandbox's private anonymous memory with userfaultfd and hands it to
``criu lazy-pages``, a daemon started just before the restore: it serves a page the
moment a process touches it, copies all the others in the background, and exits. The
pages are charged to the sandbox's memory cgroup as they arrive.

The daemon opens the images while the restore runs and reads them through those
descriptors, so they may be deleted as soon as the restore returns (a suspend's images,
or a checkpoint deleted meanwhile). Until it has finished, the sandbox must not be saved
again (``settle``). A daemon killed half-way would leave the pages it had not copied
reading as zeros, so it is made the OOM killer's last choice, and it lives only as long
as the copy takes (~0.2-2 s per 100 MiB here). Small sandboxes are restored eagerly:
below ``LAZY_MIN_BYTES`` the daemon costs more than it saves. So are copies of a start
snapshot, whatever their size: a fresh sandbox's first calls touch nearly all of its
memory (envd, a kernel and its server), and each page fault served through the daemon
costs more than the page copied in by the restore (create → first `1+1` of the
code interpreter, 83 MiB of pages, ``bench/run_code.py``: 150 ms p50 lazily, 129-133 ms
whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path

from ...slots import wait_exit
from ._args import lazy_pages_argv

_log = logging.getLogger(__name__)
LAZY_MIN_BYTES = 16 << 20
_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


# The daemon still filling each slot's memory, followed until it exits.
_running: dict[str, asyncio.Future[None]] = {}


def worth_it(images: Path) -> bool:
    """Whether the saved memory is large enough to restore lazily."""
    return sum(p.stat().st_size for p in images.glob("pages-*.img")) >= LAZY_MIN_BYTES


async def start(criu: str, images: Path, work: Path) -> int:
    """Start the daemon serving ``images``; returns its pid. The restore need not wait
    for it: CRIU (with Bac's patch) retries connecting to its socket for a few seconds,
    so both start up together, and a daemon that dies early fails the restore."""
    (work / "lazy-pages.socket").unlink(missing_ok=True)
    argv = lazy_pages_argv(criu, images=images, work=work)
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        # posix_spawn, not an asyncio subprocess: asyncio kills a child whose transport
        # closes (as at server shutdown), and a daemon killed half-way leaves memory
        # reading as zeros. In a session of its own, it outlives the server if need be.
        pid = os.posix_spawn(argv[0], argv, _ENV, setsid=True, file_actions=[  # noqa: ASYNC221
            (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1),
            (os.POSIX_SPAWN_DUP2, null, 2)])
    finally:
        os.close(null)
    _spare_from_oom_killer(pid)
    return pid


def _spare_from_oom_killer(pid: int) -> None:
    # Pages not yet copied would read as zeros if the daemon were killed.
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/oom_score_adj").write_text("-1000")


async def stop(pid: int) -> None:
    """End a daemon whose restore failed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    await wait_exit(pid)


def track(slot: str, pid: int) -> None:
    """Follow a daemon that serves a restored slot until it exits."""

    async def follow() -> None:
        code = await wait_exit(pid)
        if code != 0:
            _log.error("criu lazy-pages for slot %s exited %d: memory it had not copied "
                       "reads as zeros", slot, code)
        if _running.get(slot) is done:
            del _running[slot]

    done = asyncio.ensure_future(follow())
    _running[slot] = done


async def settle(slot: str) -> None:
    """Wait until the slot's memory is all back (before it may be saved again)."""
    done = _running.get(slot)
    if done is not None:
        await asyncio.shield(done)
