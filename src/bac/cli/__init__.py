"""The ``bac`` command line: run a server, manage keys, drive sandboxes, build templates.

Every client command is built on the public SDK (``bac``); ``serve``, ``keys`` and ``admin``
administer a local server (:mod:`bac.cli._admin`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import NoReturn

import click

from bac._version import __version__
from bac.cli._admin import admin, keys, node, serve
from bac.cli._artefacts import artefacts
from bac.cli._costs import caps, usage
from bac.cli._desktop import desktop
from bac.cli._events import events, webhooks
from bac.cli._exec import exec_
from bac.cli._files import files
from bac.cli._fleet import fleet
from bac.cli._mcp import mcp
from bac.cli._output import BacGroup, exit_code_help
from bac.cli._run_code import run_code
from bac.cli._sandbox import sandbox
from bac.cli._sandbox_state import STATE_COMMANDS
from bac.cli._shell import shell
from bac.cli._template import template
from bac.cli._trace import trace


@click.group(cls=BacGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=exit_code_help())
@click.option("--api-url", default=None, metavar="URL",
              help="Bac API (default: BAC_API_URL, E2B_API_URL, or http://localhost:3000).")
@click.option("--api-key", default=None, metavar="KEY",
              help="API key (default: BAC_API_KEY or E2B_API_KEY).")
@click.option("--request-timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Deadline of each API request (0: none; default 60).")
@click.version_option(__version__, prog_name="bac")
@click.pass_context
def cli(
    ctx: click.Context, api_url: str | None, api_key: str | None, request_timeout: float | None
) -> None:
    """Bac: sandboxes for AI agents, compatible with E2B's SDKs.

    Every command has examples in its --help. Lists print a table on a terminal and
    plain columns when piped; --format json (or --json) for scripts, -q for ids only.

    \b
    Examples:
      bac serve &                                 # the server, on http://localhost:3000
      export BAC_API_KEY=$(bac keys create my-team)
      SBX=$(bac sandbox create)
      bac exec $SBX -- uname -a
      bac exec -it $SBX -- python3
      bac files cp ./data.csv $SBX:/tmp/
      bac sandbox rm $SBX
    """
    opts = {"api_url": api_url, "api_key": api_key, "request_timeout": request_timeout}
    ctx.obj = {key: value for key, value in opts.items() if value is not None}


cli.add_command(serve)
cli.add_command(node)
cli.add_command(keys)
cli.add_command(admin)
cli.add_command(fleet)
for _command in STATE_COMMANDS:
    sandbox.add_command(_command)
cli.add_command(sandbox)
cli.add_command(exec_, name="exec")
cli.add_command(desktop)
cli.add_command(shell)
cli.add_command(files)
cli.add_command(run_code)
cli.add_command(template)
cli.add_command(events)
cli.add_command(trace)
cli.add_command(webhooks)
cli.add_command(usage)
cli.add_command(caps)
cli.add_command(artefacts)
cli.add_command(mcp)


def main() -> NoReturn:
    """Entry point of the ``bac`` executable.

    The command's work is done when click returns: its output is flushed and the process
    ends with its exit code without interpreter finalization, which would also tear down
    the SDK's native HTTP runtime (pyqwest's); that teardown rarely aborts the process
    (SIGABRT, after the command had succeeded), turning a success into a crash."""
    try:
        cli(prog_name="bac")
    except SystemExit as ended:
        _leave(ended.code)
    _leave(0)


def _leave(code: str | int | None) -> NoReturn:
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to say
            stream.flush()
    logging.shutdown()
    os._exit(code or 0)


__all__ = ["cli", "main"]
