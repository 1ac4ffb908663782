"""A remote terminal on the local one (``bac shell``, ``bac exec -t``), and what both
``bac exec`` modes do when the CLI is told to stop.

On a PTY the local terminal goes into raw mode (when keystrokes are forwarded), so every
key, Ctrl-C included, reaches the remote program; window size changes (SIGWINCH) resize
the remote PTY. A SIGINT or SIGTERM sent to the CLI itself kills the remote process
before the CLI exits 128 + the signal's number, so nothing is left running in the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import sys
import termios
import tty
from collections.abc import AsyncIterator, Iterator
from typing import Any

from bac import AsyncCommandHandle, AsyncSandbox, CommandExitError, PtySize, SandboxError
from bac.cli._stdin import stdin_chunks

KILL_DEADLINE = 10.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def terminal_size() -> PtySize:
    cols, rows = shutil.get_terminal_size((80, 24))
    return PtySize(rows=rows, cols=cols)


def exit_status(exc: CommandExitError) -> int:
    """The remote exit code as a local one (a killed process has none: 137, as SIGKILL)."""
    return exc.exit_code if 0 <= exc.exit_code < 256 else 137


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[None]:
    """Raw mode on ``fd`` for the block; restored however it ends."""
    saved = termios.tcgetattr(fd)
    try:
        # TCSANOW keeps keys typed while connecting (the default flush would drop them).
        tty.setraw(fd, termios.TCSANOW)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.asynccontextmanager
async def stop_signals() -> AsyncIterator[asyncio.Future[int]]:
    """A future that gets the number of the first SIGINT or SIGTERM while the block runs."""
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[int] = loop.create_future()

    def arrived(signum: int) -> None:
        if not stopped.done():
            stopped.set_result(signum)

    installed = []
    for signum in STOP_SIGNALS:
        try:
            loop.add_signal_handler(signum, arrived, signum)
        except (NotImplementedError, RuntimeError, ValueError):
            continue  # not the main thread: the default handling stays
        installed.append(signum)
    try:
        yield stopped
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        stopped.cancel()


async def kill_quietly(handle: AsyncCommandHandle) -> None:
    """SIGKILL the remote process; one that is already gone (or a sandbox that no longer
    answers) is not worth an error while the CLI is stopping anyway."""
    with contextlib.suppress(SandboxError, TimeoutError):
        async with asyncio.timeout(KILL_DEADLINE):
            await handle.kill()


async def wait_or_stop(handle: AsyncCommandHandle, stopped: asyncio.Future[int]) -> int | None:
    """The remote exit code, or None when a stop signal came first (the process is killed)."""
    ended = asyncio.ensure_future(handle.wait())
    waiters: set[asyncio.Future[Any]] = {ended, stopped}
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    if not ended.done():
        await kill_quietly(handle)
        ended.cancel()
        await asyncio.gather(ended, return_exceptions=True)
        return None
    try:
        await ended
    except CommandExitError as exc:
        return exit_status(exc)
    return 0


def _write_out(data: bytes) -> None:
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


async def pty_session(
    box: AsyncSandbox, cmd: str | None, *, user: str | None, cwd: str | None,
    envs: dict[str, str] | None, lifetime: float, keystrokes: bool,
    stopped: asyncio.Future[int],
) -> int | None:
    """Run ``cmd`` (None: a login shell) on a remote PTY sized like this terminal, typing
    local stdin into it when ``keystrokes``; the exit code, or None when stopped."""
    loop = asyncio.get_running_loop()
    handle = await box.pty.create(terminal_size(), _write_out, user=user, cwd=cwd, envs=envs,
                                  timeout=lifetime, cmd=cmd)
    resizes: set[asyncio.Task[None]] = set()

    async def resize() -> None:
        # A resize racing the program's exit is harmless; nothing to report.
        with contextlib.suppress(SandboxError):
            await box.pty.resize(handle.pid, terminal_size())

    def resized() -> None:
        resizes.add(loop.create_task(resize()))
        resizes.difference_update({t for t in resizes if t.done()})

    async def typing() -> None:
        async for chunk in stdin_chunks():
            await box.pty.send_input(handle.pid, chunk)
        # Local end of input (the terminal closed): nobody is left to talk to the program.
        await kill_quietly(handle)

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGWINCH, resized)
    typist = asyncio.create_task(typing()) if keystrokes else None
    try:
        return await wait_or_stop(handle, stopped)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGWINCH)
        if typist is not None:
            typist.cancel()
            await asyncio.gather(typist, return_exceptions=True)
        for task in resizes:
            task.cancel()
        await asyncio.gather(*resizes, return_exceptions=True)
