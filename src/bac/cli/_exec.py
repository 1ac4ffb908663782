"""``bac exec``: run one command in a sandbox, streaming its output.

Output is written as it arrives, stdout to stdout and stderr to stderr. When local
stdin is not a terminal it is forwarded (``echo hi | bac exec SBX -- cat``). The CLI
exits with the command's own exit code.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Callable

import click

from bac import AsyncCommandHandle, AsyncSandbox, CommandExitError
from bac.cli._context import connection, run
from bac.cli._output import parse_pairs
from bac.cli._stdin import stdin_chunks


def command_line(argv: tuple[str, ...]) -> str:
    """One argument is a shell string as is; several are quoted and joined."""
    return argv[0] if len(argv) == 1 else shlex.join(argv)


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


async def execute(
    ctx: click.Context, sandbox_id: str, cmd: str, cwd: str | None, user: str | None,
    envs: dict[str, str], lifetime: float, pipe_stdin: bool,
) -> int:
    box = await AsyncSandbox.attach(sandbox_id, **connection(ctx))
    try:
        handle = await box.commands.run(
            cmd, background=True, envs=envs, user=user, cwd=cwd, stdin=pipe_stdin,
            on_stdout=_write("stdout"), on_stderr=_write("stderr"),
            timeout=lifetime,
        )
        feeder = asyncio.create_task(_forward_stdin(handle)) if pipe_stdin else None
        try:
            await handle.wait()
            return 0
        except CommandExitError as exc:
            return exc.exit_code if 0 <= exc.exit_code < 256 else 137
        finally:
            if feeder is not None:
                feeder.cancel()
                await asyncio.gather(feeder, return_exceptions=True)
    finally:
        await box.aclose()


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("sandbox_id")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--cwd", default=None, help="Working directory (default: the user's home).")
@click.option("-u", "--user", default=None, help="Run as this user (default: the sandbox's).")
@click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="Environment (repeat).")
@click.option("--timeout", type=click.FloatRange(min=0), default=0, show_default=True,
              help="Kill the command after this many seconds (0: never).")
@click.pass_context
def exec_(
    ctx: click.Context, sandbox_id: str, argv: tuple[str, ...], cwd: str | None,
    user: str | None, env: tuple[str, ...], timeout: float,
) -> None:
    """Run a command in SANDBOX_ID: bac exec SANDBOX_ID -- CMD [ARGS]..."""
    pipe_stdin = not sys.stdin.isatty()
    code = run(execute(ctx, sandbox_id, command_line(argv), cwd, user,
                       parse_pairs(env, "--env"), timeout, pipe_stdin))
    ctx.exit(code)
