"""``bac fleet pause|kill|release``: the operator's kill switch (the server's admin
routes, with ``BAC_ADMIN_TOKEN``), on every sandbox a selector matches."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import click

from bac import AsyncFleet, FleetResult
from bac.cli._context import connection, run
from bac.cli._output import BacGroup, CliError, json_option, parse_pairs, print_json

F = TypeVar("F", bound=Callable[..., Any])


@click.group(cls=BacGroup)
def fleet() -> None:
    """Pause or kill every sandbox matching a selector, on any team (the operator's kill
    switch; needs BAC_ADMIN_TOKEN, the server's admin token).

    \b
    Examples:
      BAC_ADMIN_TOKEN=... bac fleet pause --team my-team
      bac fleet release --all
    """


def _selector(func: F) -> F:
    for option in reversed([
        click.option("--all", "everything", is_flag=True, help="Every sandbox."),
        click.option("--team", default=None, metavar="TEAM", help="The team's sandboxes."),
        click.option("--metadata", "metadata", multiple=True, metavar="KEY=VALUE",
                     help="Sandboxes with this metadata pair (repeat: all must match)."),
        click.option("--template", default=None, metavar="TEMPLATE",
                     help="Sandboxes of this template (id or alias)."),
        json_option,
    ]):
        func = option(func)
    return func


def _switch(ctx: click.Context, action: str, everything: bool, team: str | None,
            metadata: tuple[str, ...], template: str | None, as_json: bool) -> None:
    pairs = parse_pairs(metadata, "--metadata")
    if everything == (team is not None or bool(pairs) or template is not None):
        raise click.UsageError("select with --all, or with --team, --metadata or "
                               "--template (not both)")
    opts = connection(ctx)

    async def body() -> FleetResult:
        async with AsyncFleet(api_url=opts.get("api_url"),
                              request_timeout=opts.get("request_timeout")) as client:
            call: Callable[..., Coroutine[Any, Any, FleetResult]] = getattr(client, action)
            return await call(all=everything, team=team, metadata=pairs, template=template)

    done = run(body())
    if as_json:
        print_json(done.raw)
    else:
        click.echo(_summary(done))
        for sandbox_id in done.sandbox_ids:
            click.echo(sandbox_id)
    if done.failed:
        first = next(iter(sorted(done.failed.items())))
        raise CliError(f"{len(done.failed)} sandbox(es) could not be frozen and keep "
                       f"running (e.g. {first[0]}: {first[1]})")


def _summary(done: FleetResult) -> str:
    if done.action == "pause":
        where = ("written to disk with their memory next" if done.mode == "disk"
                 else "held in memory (this server cannot save memory)")
        return (f"paused {done.count} sandbox(es): frozen in {done.frozen_ms:.0f} ms, "
                f"{where}; `bac fleet release` lets them resume")
    if done.action == "kill":
        return (f"killing {done.count} sandbox(es): frozen in {done.frozen_ms:.0f} ms, "
                "ending now")
    return f"released {done.count} sandbox(es): they may be resumed again"


@fleet.command()
@_selector
@click.pass_context
def pause(ctx: click.Context, everything: bool, team: str | None, metadata: tuple[str, ...],
          template: str | None, as_json: bool) -> None:
    """Freeze the matching running sandboxes now, then save them to disk; they stay paused
    (no resume, no auto-resume) until released.

    \b
    Examples:
      bac fleet pause --all
      bac fleet pause --team my-team --metadata job=crawl
    """
    _switch(ctx, "pause", everything, team, metadata, template, as_json)


@fleet.command()
@_selector
@click.pass_context
def kill(ctx: click.Context, everything: bool, team: str | None, metadata: tuple[str, ...],
         template: str | None, as_json: bool) -> None:
    """Freeze the matching running sandboxes now, then end every matching sandbox.

    \b
    Examples:
      bac fleet kill --template broken-template
    """
    _switch(ctx, "kill", everything, team, metadata, template, as_json)


@fleet.command()
@_selector
@click.pass_context
def release(ctx: click.Context, everything: bool, team: str | None, metadata: tuple[str, ...],
            template: str | None, as_json: bool) -> None:
    """Let the matching sandboxes a pause holds be resumed again.

    \b
    Examples:
      bac fleet release --all
      bac fleet release --team my-team
    """
    _switch(ctx, "release", everything, team, metadata, template, as_json)
