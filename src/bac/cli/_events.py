"""``bac events`` (a sandbox's lifecycle events) and ``bac webhooks`` (the team's
webhooks: create, list, delete, deliveries)."""

from __future__ import annotations

import dataclasses
import os

import click

from bac import (
    HEALTH_TYPES,
    LIFECYCLE_TYPES,
    WARNING_TYPE,
    AsyncEvents,
    LifecycleEvent,
    Webhook,
    WebhookDelivery,
)
from bac.cli._context import connection, run
from bac.cli._output import (
    BacGroup,
    CliError,
    View,
    json_option,
    listing_options,
    print_json,
    print_table,
)

_TYPES = click.Choice([*LIFECYCLE_TYPES, WARNING_TYPE, *HEALTH_TYPES])


def _short(event_type: str) -> str:
    return event_type.removeprefix("sandbox.lifecycle.")


@click.command()
@click.argument("sandbox_id")
@click.option("--type", "types", type=_TYPES, multiple=True, help="Only this type (repeat).")
@click.option("--limit", type=click.IntRange(1, 100), default=100, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0)
@click.option("--newest-first", is_flag=True, help="Newest first (default: oldest first).")
@json_option
@click.pass_context
def events(ctx: click.Context, sandbox_id: str, types: tuple[str, ...], limit: int,
           offset: int, newest_first: bool, as_json: bool) -> None:
    """A sandbox's lifecycle events (E2B's events API), oldest first.

    \b
    Examples:
      bac events $SBX
      bac events $SBX --type sandbox.lifecycle.killed --json
    """

    async def body() -> list[LifecycleEvent]:
        async with AsyncEvents(**connection(ctx)) as client:
            return await client.sandbox(sandbox_id, types=types, limit=limit, offset=offset,
                                        ascending=not newest_first)

    found = run(body())
    if as_json:
        print_json([e.raw for e in found])
        return
    print_table(None, ["time", "type", "details"], [
        (e.timestamp.isoformat(timespec="milliseconds"), _short(e.type),
         e.data.get("message") or "") for e in found])


@click.group(cls=BacGroup)
def webhooks() -> None:
    """Register, list and delete the team's webhooks; read their delivery log.

    \b
    Examples:
      bac webhooks create https://example.com/hook --event sandbox.lifecycle.killed --secret S
      bac webhooks ls
    """


def _row(hook: Webhook) -> tuple[str, str, str, str, str]:
    return (hook.id, hook.name, hook.url, "yes" if hook.enabled else "no",
            ", ".join(_short(t) for t in hook.events))


def _hook_json(hook: Webhook) -> dict[str, object]:
    return {"id": hook.id, "name": hook.name, "url": hook.url, "enabled": hook.enabled,
            "events": list(hook.events)}


@webhooks.command()
@click.argument("url")
@click.option("--event", "types", type=_TYPES, multiple=True, required=True,
              help="An event type to deliver (repeat).")
@click.option("--secret", default=None, metavar="SECRET",
              help="The signature secret (default: BAC_WEBHOOK_SECRET).")
@click.option("--name", default="", help="A name to tell it by.")
@click.option("--disabled", is_flag=True, help="Register it without delivering yet.")
@json_option
@click.pass_context
def create(ctx: click.Context, url: str, types: tuple[str, ...], secret: str | None,
           name: str, disabled: bool, as_json: bool) -> None:
    """Register URL for the team's events of the types given; print its id.

    \b
    Examples:
      bac webhooks create https://example.com/hook --event sandbox.lifecycle.killed \
        --event sandbox.lifecycle.created --secret S
    """
    secret = secret or os.environ.get("BAC_WEBHOOK_SECRET")
    if not secret:
        raise CliError("a signature secret is needed: --secret or BAC_WEBHOOK_SECRET", 2)

    async def body() -> Webhook:
        async with AsyncEvents(**connection(ctx)) as client:
            return await client.create_webhook(url, types, secret=secret, name=name,
                                               enabled=not disabled)

    hook = run(body())
    if as_json:
        print_json(_hook_json(hook))
    else:
        click.echo(hook.id)


@webhooks.command(name="list")
@listing_options
@click.pass_context
def list_(ctx: click.Context, view: View) -> None:
    """The team's webhooks.

    \b
    Examples:
      bac webhooks ls
      bac webhooks ls -q | xargs -n1 bac webhooks rm
    """

    async def body() -> list[Webhook]:
        async with AsyncEvents(**connection(ctx)) as client:
            return await client.webhooks()

    found = run(body())
    view.show(["ID", "NAME", "URL", "ENABLED", "EVENTS"], [_row(h) for h in found],
              [_hook_json(h) for h in found], empty="no webhooks")


@webhooks.command()
@click.argument("webhook_id")
@click.pass_context
def delete(ctx: click.Context, webhook_id: str) -> None:
    """Unregister a webhook (its delivery log goes with it).

    \b
    Examples:
      bac webhooks rm WEBHOOK_ID
    """

    async def body() -> bool:
        async with AsyncEvents(**connection(ctx)) as client:
            return await client.delete_webhook(webhook_id)

    if not run(body()):
        raise CliError(f"no webhook {webhook_id!r}", 4)


@webhooks.command()
@click.argument("webhook_id")
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
@json_option
@click.pass_context
def deliveries(ctx: click.Context, webhook_id: str, limit: int, as_json: bool) -> None:
    """A webhook's latest deliveries, newest first.

    \b
    Examples:
      bac webhooks deliveries WEBHOOK_ID --limit 5
    """

    async def body() -> list[WebhookDelivery]:
        async with AsyncEvents(**connection(ctx)) as client:
            return await client.deliveries(webhook_id, limit=limit)

    found = run(body())
    if as_json:
        print_json([dataclasses.asdict(d) for d in found])
        return
    print_table(None, ["id", "type", "status", "attempts", "code", "error"], [
        (d.id, _short(d.event_type), d.status, d.attempts, d.response_code, d.last_error)
        for d in found])
