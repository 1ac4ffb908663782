"""How the CLI talks to people and scripts: tables, JSON, spinners, and errors.

CLI error tree (what a failed command exits with)::

    CliError(click.ClickException)    one red line on stderr, never a traceback
        exit 1   ServerError, SandboxError not listed below
        exit 2   InvalidArgumentError, and Click's own usage errors
        exit 3   AuthenticationError, PermissionDeniedError (CapReachedError)
        exit 4   NotFoundError (SandboxNotFoundError, PathNotFoundError)
        exit 5   TimeoutError
        exit 6   SandboxNotRunningError, SandboxUnreachableError
        exit 7   ServerUnreachableError
        exit 8   RateLimitError
        exit 130 interrupted (Ctrl-C)

``bac exec`` and ``bac shell`` exit with the remote command's own code instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

import bac

F = TypeVar("F", bound=Callable[..., Any])

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)

EXIT_CODES: list[tuple[type[bac.SandboxError], int]] = [
    (bac.InvalidArgumentError, 2),
    (bac.AuthenticationError, 3),
    (bac.PermissionDeniedError, 3),
    (bac.NotFoundError, 4),
    (bac.TimeoutError, 5),
    (bac.SandboxNotRunningError, 6),
    (bac.SandboxUnreachableError, 6),
    (bac.ServerUnreachableError, 7),
    (bac.RateLimitError, 8),
]


class CliError(click.ClickException):
    """A failure reported as one line, with an exit code chosen by its cause."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        # Click declares exit_code per class; one class with per-instance codes is simpler.
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: IO[Any] | None = None) -> None:
        stderr.print(f"[bold red]error:[/] {self.message}", highlight=False, markup=True)


def exit_code_for(error: bac.SandboxError) -> int:
    for cls, code in EXIT_CODES:
        if isinstance(error, cls):
            return code
    return 1


def from_sdk(error: bac.SandboxError) -> CliError:
    text = str(error) or type(error).__name__
    return CliError(text.splitlines()[0] if text else type(error).__name__, exit_code_for(error))


class BacGroup(click.Group):
    """A group whose commands turn SDK exceptions into :class:`CliError`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except bac.SandboxError as error:
            raise from_sdk(error) from error
        except KeyboardInterrupt:
            stderr.print("interrupted")
            raise click.exceptions.Exit(130) from None


def json_option(func: F) -> F:
    """Add ``--json``: machine-readable output instead of a table."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    # Piped output has no window to fit; don't fold ids into the 80-column default.
    console = stdout if stdout.is_terminal else Console(soft_wrap=True, width=240)
    console.print(table)


def parse_pairs(values: Iterable[str], what: str) -> dict[str, str]:
    """``KEY=VALUE`` options into a dict; a missing ``=`` is a usage error."""
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint=what)
        pairs[key] = val
    return pairs
