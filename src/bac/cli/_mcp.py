"""``bac mcp``: Bac's sandbox tools served to an MCP client over stdio
(:mod:`bac.agents.mcp_server`)."""

from __future__ import annotations

import click

from bac import ConnectionConfig
from bac.cli._context import connection, run
from bac.cli._output import CliError


@click.command(name="mcp")
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve the sandbox tools to an MCP client on stdin/stdout.

    The client starts this command itself; give it BAC_API_URL and BAC_API_KEY in the
    environment (or --api-url/--api-key). Tools: create_sandbox, run_command, run_code,
    read_file, write_file, list_files, get_port_url, pause_sandbox, resume_sandbox,
    checkpoint_sandbox, restore_sandbox, fork_sandbox, kill_sandbox, read_trace,
    list_sandboxes; resources: bac://sandboxes. docs/agents.md has the set-up of Claude
    Desktop, Cursor and others.

    \b
    Examples:
      BAC_API_KEY=... bac mcp                     # what an MCP client runs
      bac --api-url http://10.0.0.5:3000 mcp
    """
    opts = connection(ctx)
    ConnectionConfig.resolve(**opts).require_api_key()  # say it now, not at the first call
    try:
        from bac.agents.mcp_server import serve_stdio
    except ImportError as exc:
        raise CliError(f"bac mcp needs the mcp extra: pip install 'bac[mcp]' (cannot "
                       f"import {exc.name})", exit_code=1) from exc
    run(serve_stdio(**opts))
