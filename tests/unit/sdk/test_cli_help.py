"""Every command's --help shows examples, as docker's and kubectl's do."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from bac.cli import cli


def _commands(command: click.Command, path: list[str]) -> Iterator[tuple[list[str],
                                                                          click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, [*path, name])


def test_every_help_has_examples() -> None:
    """Each command's and group's --help ends with examples of `bac` command lines."""
    for path, _ in _commands(cli, []):
        shown = CliRunner().invoke(cli, [*path, "--help"]).stdout
        examples = shown.partition("Examples:")[2]
        assert "bac " in examples, " ".join(["bac", *path])
