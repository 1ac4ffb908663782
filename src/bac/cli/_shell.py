"""``bac shell``: an interactive terminal in a sandbox.

The local terminal goes into raw mode so every keystroke (Ctrl-C included) reaches the
remote shell; window size changes (SIGWINCH) resize the remote PTY. The terminal is
restored however the session ends, and the CLI exits with the remote shell's code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import termios
import tty

import click

from bac import AsyncSandbox, CommandExitError, PtySize, SandboxError
from bac.cli._context import connection, run
from bac.cli._output import CliError
from bac.cli._stdin import stdin_chunks


def _size() -> PtySize:
    cols, rows = shutil.get_terminal_size((80, 24))
    return PtySize(rows=rows, cols=cols)


def _write_out(data: bytes) -> None:
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


async def session(ctx: click.Context, sandbox_id: str, cwd: str | None, user: str | None) -> int:
    box = await AsyncSandbox.attach(sandbox_id, **connection(ctx))
    loop = asyncio.get_running_loop()
    try:
        handle = await box.pty.create(_size(), _write_out, user=user, cwd=cwd, timeout=0)

        async def resize() -> None:
            # A resize racing the shell's exit is harmless; nothing to report.
            with contextlib.suppress(SandboxError):
                await box.pty.resize(handle.pid, _size())

        def resized() -> None:
            resizes.add(loop.create_task(resize()))
            resizes.difference_update({t for t in resizes if t.done()})

        resizes: set[asyncio.Task[None]] = set()

        async def keystrokes() -> None:
            async for chunk in stdin_chunks():
                await box.pty.send_input(handle.pid, chunk)

        loop.add_signal_handler(signal.SIGWINCH, resized)
        typing = asyncio.create_task(keystrokes())
        ended = asyncio.create_task(handle.wait())
        try:
            await asyncio.wait({typing, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_signal_handler(signal.SIGWINCH)
            typing.cancel()
            await asyncio.gather(typing, return_exceptions=True)
            if not ended.done():
                await box.pty.kill(handle.pid)
                await asyncio.gather(ended, return_exceptions=True)
        try:
            await ended
        except CommandExitError as exc:
            return exc.exit_code if 0 <= exc.exit_code < 256 else 137
        return 0
    finally:
        await box.aclose()


@click.command()
@click.argument("sandbox_id")
@click.option("--cwd", default=None, help="Start in this directory.")
@click.option("-u", "--user", default=None, help="Log in as this user.")
@click.pass_context
def shell(ctx: click.Context, sandbox_id: str, cwd: str | None, user: str | None) -> None:
    """Open an interactive shell in SANDBOX_ID (exit it with `exit` or Ctrl-D)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError("bac shell needs a terminal; use `bac exec` for scripts", exit_code=2)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        # TCSANOW keeps keys typed while connecting (the default flush would drop them).
        tty.setraw(fd, termios.TCSANOW)
        code = run(session(ctx, sandbox_id, cwd, user))
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        with contextlib.suppress(OSError):
            os.write(sys.stdout.fileno(), b"\r\n")
    sys.stdout.flush()
    sys.stderr.flush()
    # The session is over and the terminal restored: the remote shell's exit code is
    # the answer. Interpreter finalization (which also tears down the SDK's native
    # transport) is skipped: this process once ended there by SIGABRT, losing that code;
    # the cause was not reproduced.
    os._exit(code)
