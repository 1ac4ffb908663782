"""``bac exec``: run one command in a sandbox, streaming its output.

Output is written as it arrives, stdout to stdout and stderr to stderr. Local stdin is
forwarded when it is not a terminal (``echo hi | bac exec SBX -- cat``) or with ``-i``;
``-t`` runs the command on a PTY (``-it``: interactive programs such as ``python3`` work
as on the local terminal), as docker's ``exec -it`` does. The CLI exits with the command's
own exit code; 124 when ``--timeout`` stopped it; 130 (143) on SIGINT (SIGTERM), after
killing the remote command. A paused sandbox is resumed first, with a line on stderr.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import click

import bac
from bac import AsyncCommandHandle, AsyncSandbox
from bac.cli._context import attach, run
from bac.cli._output import EXEC_TIMED_OUT, CliError, parse_pairs, stderr
from bac.cli._stdin import stdin_chunks
from bac.cli._terminal import (
    pty_session,
    raw_terminal,
    stop_signals,
    wait_or_stop,
)


def command_line(argv: tuple[str, ...]) -> str:
    """One argument is a shell string as is; several are quoted and joined."""
    return argv[0] if len(argv) == 1 else shlex.join(argv)


@dataclass(frozen=True)
class ExecOptions:
    """How ``bac exec`` runs its command."""

    cwd: str | None
    user: str | None
    envs: dict[str, str]
    lifetime: float  # seconds; 0: no limit
    forward_stdin: bool  # as the command's stdin (no PTY)
    tty: bool
    keystrokes: bool  # typed into the PTY (-it)


def _write(stream: str) -> Callable[[str], None]:
    target = sys.stdout if stream == "stdout" else sys.stderr

    def emit(text: str) -> None:
        target.write(text)
        target.flush()

    return emit


async def _forward_stdin(handle: AsyncCommandHandle) -> None:
    async for chunk in stdin_chunks():
        await handle.send_stdin(chunk)
    await handle.close_stdin()


async def _piped(box: AsyncSandbox, cmd: str, opts: ExecOptions,
                 stopped: asyncio.Future[int]) -> int | None:
    handle = await box.commands.run(
        cmd, background=True, envs=opts.envs, user=opts.user, cwd=opts.cwd,
        stdin=opts.forward_stdin, on_stdout=_write("stdout"), on_stderr=_write("stderr"),
        timeout=opts.lifetime,
    )
    feeder = asyncio.create_task(_forward_stdin(handle)) if opts.forward_stdin else None
    try:
        return await wait_or_stop(handle, stopped)
    finally:
        if feeder is not None:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)


async def _run(box: AsyncSandbox, cmd: str, opts: ExecOptions,
               stopped: asyncio.Future[int]) -> int | None:
    if not opts.tty:
        return await _piped(box, cmd, opts, stopped)
    return await pty_session(box, cmd, user=opts.user, cwd=opts.cwd, envs=opts.envs,
                             lifetime=opts.lifetime, keystrokes=opts.keystrokes,
                             stopped=stopped)


async def execute(ctx: click.Context, sandbox_id: str, cmd: str, opts: ExecOptions) -> int:
    box = await attach(ctx, sandbox_id)  # says so on stderr if it resumes: before raw mode
    try:
        async with stop_signals() as stopped:
            try:
                with raw_terminal(sys.stdin.fileno()) if opts.keystrokes else nullcontext():
                    code = await _run(box, cmd, opts, stopped)
            except bac.TimeoutError as exc:
                if not opts.lifetime:
                    raise  # a request's deadline, not the command's
                # The stream ends at the deadline it carried, where envd kills the command.
                raise CliError(f"the command was stopped after its --timeout of "
                               f"{opts.lifetime:g} s", EXEC_TIMED_OUT) from exc
            if code is None:
                stderr.print("interrupted: the remote command was killed", highlight=False)
                return 128 + stopped.result()
            return code
    finally:
        await box.aclose()


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("sandbox_id")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("-i", "--interactive", is_flag=True,
              help="Forward stdin even from a terminal (piped stdin always is).")
@click.option("-t", "--tty", is_flag=True,
              help="Run the command on a terminal (with -i: an interactive session).")
@click.option("--cwd", default=None, help="Working directory (default: the user's home).")
@click.option("-u", "--user", default=None, help="Run as this user (default: the sandbox's).")
@click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="Environment (repeat).")
@click.option("--timeout", type=click.FloatRange(min=0), default=0, show_default=True,
              help="Stop the command after this many seconds, exit 124 (0: never).")
@click.pass_context
def exec_(
    ctx: click.Context, sandbox_id: str, argv: tuple[str, ...], interactive: bool, tty: bool,
    cwd: str | None, user: str | None, env: tuple[str, ...], timeout: float,
) -> None:
    """Run a command in SANDBOX_ID and exit with its exit code.

    One argument is run as a shell string; several are quoted and joined. A paused
    sandbox is resumed first (as E2B's connect does), with a line on stderr. Ctrl-C
    kills the remote command, then exits 130.

    \b
    Examples:
      bac exec $SBX -- uname -a
      bac exec $SBX -- 'ls /tmp | wc -l'        # one argument: a shell string
      echo data | bac exec $SBX -- wc -c         # piped stdin is forwarded
      bac exec -it $SBX -- python3               # an interactive program on a terminal
      bac exec --timeout 2 $SBX -- sleep 10      # stopped after 2 s: exit 124
    """
    stdin_tty = sys.stdin.isatty()
    if tty and interactive and not stdin_tty:
        raise CliError("-it needs a terminal on stdin (the input is not a TTY); drop -t to "
                       "pipe input", exit_code=2)
    raw = tty and interactive
    opts = ExecOptions(cwd=cwd, user=user, envs=parse_pairs(env, "--env"), lifetime=timeout,
                       forward_stdin=not tty and (interactive or not stdin_tty), tty=tty,
                       keystrokes=raw)
    code = run(execute(ctx, sandbox_id, command_line(argv), opts))
    ctx.exit(code)
