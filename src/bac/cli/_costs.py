"""``bac usage`` (what the team's sandboxes used and cost, per sandbox, day, team or
metadata value; or one sandbox's whole life and its caps) and ``bac caps`` (the team's cost
caps: list, create, set, delete)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

import click

from bac import (
    AsyncCosts,
    CapAction,
    CapPeriod,
    CapScope,
    CostCap,
    SandboxUsage,
    Usage,
    UsageReport,
)
from bac.cli._context import connection, run
from bac.cli._output import (
    BacGroup,
    CliError,
    View,
    json_option,
    listing_options,
    parse_pairs,
    print_json,
    print_table,
)

_ACTIONS = click.Choice(["pause", "kill"])


def _group_by(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None or value in ("sandbox", "team", "day") or (
            value.startswith("metadata.") and value != "metadata."):
        return value
    raise click.BadParameter("expected sandbox, team, day or metadata.KEY", ctx, param)


_DAY = click.DateTime(formats=["%Y-%m-%d"])


@click.command()
@click.argument("sandbox_id", required=False)
@click.option("--group-by", default=None, callback=_group_by,
              metavar="sandbox|team|day|metadata.KEY", help="One row per this (default: sandbox).")
@click.option("--metadata", "metadata", multiple=True, metavar="KEY=VALUE",
              help="Only sandboxes with this metadata pair (repeat: all must match).")
@click.option("--since", type=_DAY, default=None, metavar="YYYY-MM-DD",
              help="First day (UTC; default: the first of this month).")
@click.option("--until", type=_DAY, default=None, metavar="YYYY-MM-DD",
              help="Last day, included (UTC; default: today).")
@json_option
@click.pass_context
def usage(ctx: click.Context, sandbox_id: str | None, group_by: str | None,
          metadata: tuple[str, ...], since: datetime | None, until: datetime | None,
          as_json: bool) -> None:
    """What the team's sandboxes used and cost over the days asked, one row per sandbox
    unless --group-by says otherwise, most costly first, and the total.

    SANDBOX_ID alone: that sandbox over its whole life, and the caps covering it; with
    other options, its usage over the days asked.

    \b
    Examples:
      bac usage
      bac usage --group-by day --since 2025-01-01
      bac usage $SBX                              # its whole life and its caps
    """
    pairs = parse_pairs(metadata, "--metadata")
    if sandbox_id is not None and not (group_by or pairs or since or until):
        _sandbox_usage(ctx, sandbox_id, as_json)
        return
    by = group_by or "sandbox"
    # click.DateTime parses to midnight; the API counts in days.
    first = None if since is None else since.date()
    last = None if until is None else until.date()

    async def body() -> UsageReport:
        async with AsyncCosts(**connection(ctx)) as client:
            return await client.usage(group_by=by, metadata=pairs, sandbox_id=sandbox_id,
                                      since=first, until=last)

    report = run(body())
    if as_json:
        print_json(report.raw)
        return
    title = f"{report.since} .. {report.until} ({report.currency})"
    print_table(title, [by, *_FIGURES], [_figures(g.key or "", g) for g in report.groups])
    _total(report.total, report.currency)


_FIGURES = ["vCPU-s", "GiB-s", "storage GiB-h", "cost"]


def _figures(key: str, figure: Usage) -> tuple[str, ...]:
    return (key, f"{figure.vcpu_seconds:.1f}", f"{figure.memory_gib_seconds:.1f}",
            f"{figure.storage_gib_hours:.4f}", f"{figure.cost:.6f}")


def _total(figure: Usage, currency: str) -> None:
    click.echo(f"total: {figure.cost:.6f} {currency} ({figure.vcpu_seconds:.1f} vCPU-s, "
               f"{figure.memory_gib_seconds:.1f} GiB-s, {figure.storage_gib_hours:.4f} "
               "storage GiB-h)")


def _sandbox_usage(ctx: click.Context, sandbox_id: str, as_json: bool) -> None:
    async def body() -> SandboxUsage:
        async with AsyncCosts(**connection(ctx)) as client:
            return await client.sandbox_usage(sandbox_id)

    found = run(body())
    if as_json:
        print_json(found.raw)
        return
    print_table(f"its whole life ({found.currency})", ["sandbox", *_FIGURES],
                [_figures(found.sandbox_id, found.usage)])
    if found.caps:
        print_table("caps covering it", _COLUMNS, [_row(c) for c in found.caps])


@click.group(cls=BacGroup)
def caps() -> None:
    """Cap the cost of a sandbox, of a metadata group or of the team; reached, a cap pauses
    or kills what it covers and refuses creates it would cover.

    \b
    Examples:
      bac caps create --team --period month --limit 50
      bac caps ls
    """


def _covers(cap: CostCap) -> str:
    if cap.scope == "sandbox":
        return f"sandbox {cap.sandbox_id}"
    if cap.scope == "group":
        return " ".join(f"{k}={v}" for k, v in (cap.metadata or {}).items())
    return "team"


def _row(cap: CostCap) -> tuple[str, ...]:
    return (cap.cap_id, _covers(cap), cap.period, f"{cap.spent:.6f}", f"{cap.limit:g}",
            cap.state, cap.action)


_COLUMNS = ["id", "covers", "period", "spent", "limit", "state", "action"]


@caps.command(name="list")
@listing_options
@click.pass_context
def list_(ctx: click.Context, view: View) -> None:
    """The team's caps, with what each has spent in its current period.

    \b
    Examples:
      bac caps ls
      bac caps ls -q
    """

    async def body() -> list[CostCap]:
        async with AsyncCosts(**connection(ctx)) as client:
            return await client.caps()

    found = run(body())
    view.show(_COLUMNS, [_row(c) for c in found], [c.raw for c in found], empty="no caps")


@caps.command()
@click.option("--sandbox", "sandbox_id", default=None, metavar="SANDBOX_ID",
              help="Cap one sandbox.")
@click.option("--metadata", "metadata", multiple=True, metavar="KEY=VALUE",
              help="Cap the sandboxes with this metadata pair (one).")
@click.option("--team", is_flag=True, help="Cap the whole team (needs --period day|month).")
@click.option("--limit", type=click.FloatRange(min=0, min_open=True), required=True,
              metavar="AMOUNT", help="The cap, in the server's currency.")
@click.option("--period", type=click.Choice(["total", "day", "month"]), default=None,
              help="Over what the cost adds up (UTC days; default: total).")
@click.option("--action", type=_ACTIONS, default="pause", show_default=True,
              help="What reaching it does to the sandboxes it covers.")
@json_option
@click.pass_context
def create(ctx: click.Context, sandbox_id: str | None, metadata: tuple[str, ...], team: bool,
           limit: float, period: str | None, action: str, as_json: bool) -> None:
    """Create a cap on exactly one of --sandbox, --metadata or --team; print its id.

    \b
    Examples:
      bac caps create --sandbox $SBX --limit 2 --action kill
      bac caps create --metadata job=crawl --limit 10 --period day
    """
    pairs = parse_pairs(metadata, "--metadata")
    if [sandbox_id is not None, bool(pairs), team].count(True) != 1:
        raise click.UsageError("cap exactly one of --sandbox ID, --metadata KEY=VALUE or "
                               "--team")
    scope: CapScope = "sandbox" if sandbox_id is not None else "group" if pairs else "team"
    if scope == "team" and period in (None, "total"):
        raise click.UsageError("a team cap needs --period day or --period month")
    chosen = cast(CapPeriod, period or "total")
    act = cast(CapAction, action)

    async def body() -> CostCap:
        async with AsyncCosts(**connection(ctx)) as client:
            return await client.create_cap(scope=scope, limit=limit, period=chosen,
                                           action=act, sandbox_id=sandbox_id,
                                           metadata=pairs or None)

    cap = run(body())
    if as_json:
        print_json(cap.raw)
    else:
        click.echo(cap.cap_id)


@caps.command(name="set")
@click.argument("cap_id")
@click.option("--limit", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="AMOUNT", help="The new cap (above what is spent: releases what it "
                                     "held paused).")
@click.option("--action", type=_ACTIONS, default=None, help="The new action.")
@json_option
@click.pass_context
def set_(ctx: click.Context, cap_id: str, limit: float | None, action: str | None,
         as_json: bool) -> None:
    """Change a cap's limit or action.

    \b
    Examples:
      bac caps set CAP_ID --limit 100
    """
    if limit is None and action is None:
        raise click.UsageError("give --limit, --action or both")
    act = cast(CapAction | None, action)

    async def body() -> CostCap:
        async with AsyncCosts(**connection(ctx)) as client:
            return await client.update_cap(cap_id, limit=limit, action=act)

    cap = run(body())
    if as_json:
        print_json(cap.raw)
        return
    print_table(None, _COLUMNS, [_row(cap)])


@caps.command()
@click.argument("cap_id")
@click.pass_context
def delete(ctx: click.Context, cap_id: str) -> None:
    """Delete a cap, releasing the sandboxes it held paused.

    \b
    Examples:
      bac caps rm CAP_ID
    """

    async def body() -> bool:
        async with AsyncCosts(**connection(ctx)) as client:
            return await client.delete_cap(cap_id)

    if not run(body()):
        raise CliError(f"no cap {cap_id!r}", 4)
