"""One CLI invocation in this process, as a user would type it; holds no tests."""

from __future__ import annotations

from click.testing import CliRunner, Result

from bac.cli import cli


def bac_cli(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, input=stdin)
