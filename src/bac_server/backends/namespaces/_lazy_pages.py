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
below ``LAZY_MIN_BYTES`` the daemon costs more than it saves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

from bac_server.backends.base import CheckpointFailed

from ._criu_args import lazy_pages_argv

_log = logging.getLogger(__name__)
LAZY_MIN_BYTES = 16 << 20
_READY_TIMEOUT_S = 10.0
_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


# The daemon still filling each slot's memory, followed until it exits.
_running: dict[str, asyncio.Future[None]] = {}


def worth_it(images: Path) -> bool:
    """Whether the saved memory is large enough to restore lazily."""
    return sum(p.stat().st_size for p in images.glob("pages-*.img")) >= LAZY_MIN_BYTES


async def _ready(read_fd: int) -> bool:
    """The daemon writes one byte to its status fd once it listens; EOF: it died."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        if not got.done():
            got.set_result(os.read(read_fd, 1))

    loop.add_reader(read_fd, readable)
    try:
        return bool(await asyncio.wait_for(got, _READY_TIMEOUT_S))
    finally:
        loop.remove_reader(read_fd)


async def start(criu: str, images: Path, work: Path) -> asyncio.subprocess.Process:
    """Start the daemon serving ``images``; returns once it accepts the restore."""
    (work / "lazy-pages.socket").unlink(missing_ok=True)
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        proc = await asyncio.create_subprocess_exec(
            *lazy_pages_argv(criu, images=images, work=work, status_fd=write_fd), env=_ENV,
            pass_fds=(write_fd,), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        os.close(write_fd)
        write_fd = -1
        if not await _ready(read_fd):
            await proc.wait()
            raise CheckpointFailed(f"criu lazy-pages exited {proc.returncode} before it was "
                                   f"ready (log: {work / 'lazy-pages.log'})")
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    _spare_from_oom_killer(proc.pid)
    return proc


def _spare_from_oom_killer(pid: int) -> None:
    # Pages not yet copied would read as zeros if the daemon were killed.
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/oom_score_adj").write_text("-1000")


async def stop(proc: asyncio.subprocess.Process) -> None:
    """End a daemon whose restore failed."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()


def track(slot: str, proc: asyncio.subprocess.Process) -> None:
    """Follow a daemon that serves a restored slot until it exits."""

    async def follow() -> None:
        code = await proc.wait()
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
