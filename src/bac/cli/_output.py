"""How the CLI talks to people and scripts: tables, JSON, ids, and errors.

Results follow docker's and kubectl's habits: a table on a terminal, plain columns (no
box drawing) when stdout is a pipe, ``--format json`` (or ``--json``) for scripts, ``-q``
for ids only and ``--no-headers``; ``ls`` and ``rm`` name a group's list and
kill/delete commands.

CLI error tree (what a failed command exits with)::

    CliError(click.ClickException)    one red line on stderr, never a traceback
        exit 1   ServerError, SandboxError not listed below
        exit 2   InvalidArgumentError, and Click's own usage errors
        exit 3   AuthenticationError, PermissionDeniedError (CapReachedError)
        exit 4   NotFoundError (SandboxNotFoundError, PathNotFoundError): also a sandbox
                 that was killed or timed out, which the server no longer knows
        exit 5   TimeoutError (a request's deadline)
        exit 6   SandboxNotRunningError, SandboxUnreachableError: the sandbox ended or
                 stopped answering while a command used it
        exit 7   ServerUnreachableError
        exit 8   RateLimitError
        exit 124 ``bac exec --timeout`` stopped the command (as GNU ``timeout`` does)
        exit 130 interrupted (Ctrl-C); ``bac exec`` kills the remote command first

``bac exec`` and ``bac shell`` exit with the remote command's own code instead.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import IO, Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
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
EXEC_TIMED_OUT = 124
INTERRUPTED = 130

# What `bac --help` and docs/sdk.md show (a test keeps the three in step).
EXIT_CODE_MEANINGS: list[tuple[int, str]] = [
    (0, "success"),
    (1, "any other failure (a server error, a failed build)"),
    (2, "bad arguments or usage"),
    (3, "not authenticated or not allowed (API key, a reached cost cap)"),
    (4, "not found: a sandbox (also one killed or timed out), a file, a template"),
    (5, "a request timed out"),
    (6, "the sandbox ended or stopped answering while a command used it"),
    (7, "the Bac server is unreachable"),
    (8, "rate limited"),
    (EXEC_TIMED_OUT, "bac exec --timeout stopped the command (as GNU timeout does)"),
    (INTERRUPTED, "interrupted (Ctrl-C); bac exec kills the remote command first"),
]


class CliError(click.ClickException):
    """A failure reported as one line, with an exit code chosen by its cause."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        # Click declares exit_code per class; one class with per-instance codes is simpler.
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: IO[Any] | None = None) -> None:
        # The message is text, never markup: "bac[server]" or a path "a[1]" stay whole.
        stderr.print(f"[bold red]error:[/] {escape(self.message)}", highlight=False,
                     markup=True)


def exit_code_for(error: bac.SandboxError) -> int:
    for cls, code in EXIT_CODES:
        if isinstance(error, cls):
            return code
    return 1


def from_sdk(error: bac.SandboxError) -> CliError:
    text = str(error) or type(error).__name__
    return CliError(text.splitlines()[0] if text else type(error).__name__, exit_code_for(error))


def exit_code_help() -> str:
    """The exit-code table, as `bac --help` ends (``\\b`` keeps Click from rewrapping it)."""
    lines = [f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODE_MEANINGS]
    return "\b\nExit codes (bac exec and bac shell: the remote command's own):\n" + "\n".join(
        lines)


# docker's and kubectl's short names, each for the first of its commands a group has.
ALIASES: dict[str, tuple[str, ...]] = {
    "ls": ("list",),
    "rm": ("kill", "delete", "revoke"),
}


class BacGroup(click.Group):
    """A group whose commands turn SDK exceptions into :class:`CliError`, and which
    answers to ``ls`` and ``rm`` for its list and kill/delete commands."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except bac.SandboxError as error:
            raise from_sdk(error) from error
        except KeyboardInterrupt:
            stderr.print("interrupted")
            raise click.exceptions.Exit(INTERRUPTED) from None

    def _own(self, ctx: click.Context, name: str) -> click.Command | None:
        return click.Group.get_command(self, ctx, name)

    def _alias_target(self, ctx: click.Context, alias: str) -> str | None:
        """The command ``alias`` stands for here; None when the group has its own."""
        if self._own(ctx, alias) is not None:
            return None
        return next((t for t in ALIASES.get(alias, ()) if self._own(ctx, t) is not None), None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self._alias_target(ctx, cmd_name)
        return self._own(ctx, cmd_name if target is None else target)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        named: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            aliases = [alias for alias in ALIASES if self._alias_target(ctx, alias) == name]
            named.append((", ".join([name, *aliases]), command))
        if named:
            limit = formatter.width - 6 - max(len(shown) for shown, _ in named)
            with formatter.section("Commands"):
                formatter.write_dl([(shown, command.get_short_help_str(limit))
                                    for shown, command in named])


class Format(enum.Enum):
    """What a command prints its result as."""

    TABLE = "table"
    JSON = "json"


@dataclass(frozen=True)
class View:
    """How a list command shows its rows: ``--format``, ``-q`` and ``--no-headers``."""

    format: Format = Format.TABLE
    quiet: bool = False
    headers: bool = True

    def show(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], records: Any,
             *, ids: Iterable[str] | None = None, empty: str | None = None) -> None:
        """Ids (``-q``, the first column unless ``ids``), JSON ``records``, or a table;
        ``empty`` goes to stderr when a table would have no rows."""
        if self.quiet:
            for value in ids if ids is not None else (str(row[0]) for row in rows):
                click.echo(value)
        elif self.format is Format.JSON:
            print_json(records)
        elif not rows and empty:
            stderr.print(empty)
        else:
            print_table(None, columns, rows, headers=self.headers)


def _view_callback(change: Callable[[View, Any], View]) -> Callable[..., None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        # Every option's callback runs, given or not; each changes the view only when given.
        ctx.params["view"] = change(ctx.params.get("view", View()), value)

    return callback


def _as_json_callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    given = value is True or value == Format.JSON.value
    ctx.params["as_json"] = ctx.params.get("as_json", False) or given
    if value == Format.TABLE.value:
        ctx.params["as_json"] = False


_FORMAT = click.Choice([f.value for f in Format])


def json_option(func: F) -> F:
    """Add ``--json`` and ``--format json|table``, as the command's ``as_json`` flag."""
    func = click.option("--format", "output_format", type=_FORMAT, default=None,
                        expose_value=False, callback=_as_json_callback,
                        help="Print a table (default) or JSON.")(func)
    return click.option("--json", "as_json_flag", is_flag=True, expose_value=False,
                        callback=_as_json_callback, help="Print JSON for scripts.")(func)


def listing_options(func: F) -> F:
    """Add ``--format``/``--json``, ``-q`` and ``--no-headers``, as the command's ``view``."""
    for option in reversed([
        click.option("--format", "output_format", type=_FORMAT, default=None,
                     expose_value=False, help="Print a table (default) or JSON.",
                     callback=_view_callback(lambda view, value: view if value is None
                                             else replace(view, format=Format(value)))),
        click.option("--json", "as_json_flag", is_flag=True, expose_value=False,
                     help="Print JSON for scripts (--format json).",
                     callback=_view_callback(lambda view, value: replace(
                         view, format=Format.JSON) if value else view)),
        click.option("-q", "--quiet", is_flag=True, expose_value=False,
                     help="Print only the first column (ids; names for files), one a line.",
                     callback=_view_callback(lambda view, value: replace(
                         view, quiet=True) if value else view)),
        click.option("--no-headers", is_flag=True, expose_value=False,
                     help="Leave out the table's header row.",
                     callback=_view_callback(lambda view, value: replace(
                         view, headers=False) if value else view)),
    ]):
        func = option(func)
    return func


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def plain_table(columns: Sequence[str], rows: Iterable[Sequence[Any]],
                headers: bool = True) -> str:
    """Columns padded with spaces, as docker prints when piped: ``awk '{print $1}'`` works."""
    lines = [[_cell(cell).replace("\n", " ") for cell in row] for row in rows]
    if headers:
        lines.insert(0, [str(column) for column in columns])
    if not lines:
        return ""
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    return "".join(
        "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        .rstrip() + "\n" for line in lines)


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]],
                *, headers: bool = True) -> None:
    if not stdout.is_terminal:
        if title:
            sys.stdout.write(title + "\n")
        sys.stdout.write(plain_table(columns, rows, headers))
        sys.stdout.flush()
        return
    table = Table(title=title, title_justify="left", header_style="bold", show_header=headers)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(cell) for cell in row))
    stdout.print(table)


def parse_pairs(values: Iterable[str], what: str) -> dict[str, str]:
    """``KEY=VALUE`` options into a dict; a missing ``=`` is a usage error."""
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint=what)
        pairs[key] = val
    return pairs
