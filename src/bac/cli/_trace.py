"""``bac trace``: what a sandbox did (lifecycle, each process, each file transfer), or a
run's trace (``--metadata run_id=X``), as a table, JSON, or followed live."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import click

from bac import AsyncSandbox, TraceEvent
from bac.cli._context import connection, run
from bac.cli._output import CliError, json_option, parse_pairs, print_json, print_table

_PAGE = 1000


def _json(event: TraceEvent) -> dict[str, Any]:
    body = dataclasses.asdict(event)
    body["timestamp"] = event.timestamp.isoformat()
    return body


def _line(event: TraceEvent, *, with_sandbox: bool) -> str:
    when = event.timestamp.isoformat(timespec="milliseconds")
    who = f"{event.sandbox_id}  " if with_sandbox else ""
    return f"{when}  {who}{event.level:<5} {event.kind:<14} {event.message}"


@click.command()
@click.argument("sandbox_id", required=False)
@click.option("--metadata", "pairs", multiple=True, metavar="KEY=VALUE",
              help="A run instead of one sandbox: every sandbox whose metadata holds each pair.")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="Only this kind (repeat): created, process, transfer, killed, ...")
@click.option("--after", type=click.IntRange(min=0), default=0, metavar="ID",
              help="Only events after this event id.")
@click.option("-f", "--follow", is_flag=True,
              help="Keep printing new events until the sandbox ends.")
@json_option
@click.pass_context
def trace(ctx: click.Context, sandbox_id: str | None, pairs: tuple[str, ...],
          kinds: tuple[str, ...], after: int, follow: bool, as_json: bool) -> None:
    """What a sandbox did, oldest first: its lifecycle, each process and each transfer.

    \b
    Examples:
      bac trace $SBX
      bac trace $SBX --follow --kind process
      bac trace --metadata run_id=r42 --json
    """
    metadata = parse_pairs(pairs, "--metadata")
    if (sandbox_id is None) == (not metadata):
        raise CliError("give a SANDBOX_ID or --metadata KEY=VALUE (a run), not both", 2)
    if follow and sandbox_id is None:
        raise CliError("--follow follows one sandbox: give its SANDBOX_ID", 2)
    opts = connection(ctx)

    async def everything() -> list[TraceEvent]:
        found: list[TraceEvent] = []
        cursor: int | None = after
        while cursor is not None:
            if sandbox_id is not None:
                page = await AsyncSandbox.trace(sandbox_id, kinds=kinds or None, after=cursor,
                                                limit=_PAGE, **opts)
            else:
                page = await AsyncSandbox.trace_run(metadata, kinds=kinds or None,
                                                    after=cursor, limit=_PAGE, **opts)
            found += page.events
            cursor = page.next_cursor
        return found

    async def live() -> None:
        assert sandbox_id is not None
        stream = AsyncSandbox.follow_trace(sandbox_id, kinds=kinds or None, after=after,
                                           **opts)
        try:
            async for event in stream:
                text = json.dumps(_json(event)) if as_json else _line(event,
                                                                      with_sandbox=False)
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
        finally:
            await stream.aclose()

    if follow:
        run(live())
        return
    events = run(everything())
    if as_json:
        print_json([_json(e) for e in events])
        return
    columns = ["id", "time", *(["sandbox"] if sandbox_id is None else []), "kind", "level",
               "message"]
    print_table(None, columns, [
        (e.id, e.timestamp.isoformat(timespec="milliseconds"),
         *([e.sandbox_id] if sandbox_id is None else []), e.kind, e.level, e.message)
        for e in events])
