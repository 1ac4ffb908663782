"""``bac shell``: an interactive terminal in a sandbox.

The local terminal goes into raw mode so every keystroke (Ctrl-C included) reaches the
remote shell; window size changes resize the remote PTY (:mod:`bac.cli._terminal`). The
terminal is restored however the session ends, and the CLI exits with the remote shell's
code.
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from bac.cli._context import attach, run
from bac.cli._output import CliError
from bac.cli._terminal import pty_session, raw_terminal, stop_signals


async def session(ctx: click.Context, sandbox_id: str, cwd: str | None, user: str | None) -> int:
    box = await attach(ctx, sandbox_id)  # says so on stderr if it resumes: before raw mode
    try:
        async with stop_signals() as stopped:
            with raw_terminal(sys.stdin.fileno()):
                code = await pty_session(box, None, user=user, cwd=cwd, envs=None,
                                         lifetime=0, keystrokes=True, stopped=stopped)
            return 128 + stopped.result() if code is None else code
    finally:
        await box.aclose()


@click.command()
@click.argument("sandbox_id")
@click.option("--cwd", default=None, help="Start in this directory.")
@click.option("-u", "--user", default=None, help="Log in as this user.")
@click.pass_context
def shell(ctx: click.Context, sandbox_id: str, cwd: str | None, user: str | None) -> None:
    """Open an interactive shell in SANDBOX_ID (exit it with `exit` or Ctrl-D).

    The same as `bac exec -it SANDBOX_ID -- bash -l`, with no timeout.

    \b
    Examples:
      bac shell $SBX
      bac shell $SBX --cwd /tmp -u root
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError("bac shell needs a terminal; use `bac exec` for scripts", exit_code=2)
    try:
        code = run(session(ctx, sandbox_id, cwd, user))
    finally:
        with contextlib.suppress(OSError):
            os.write(sys.stdout.fileno(), b"\r\n")
    ctx.exit(code)  # bac.cli.main flushes and ends the process with it
