"""``bac sandbox``: create, list, inspect, extend and kill sandboxes."""

from __future__ import annotations

from typing import cast

import click

from bac import (
    AsyncSandbox,
    CapAction,
    Lifecycle,
    SandboxHealth,
    SandboxInfo,
    SandboxQuery,
    SandboxState,
)
from bac.cli._context import connection, ends_in, run
from bac.cli._output import (
    BacGroup,
    CliError,
    View,
    json_option,
    listing_options,
    parse_pairs,
    print_json,
    print_table,
    stderr,
    stdout,
)


@click.group(cls=BacGroup)
def sandbox() -> None:
    """Create, list, inspect, pause, resume, extend and kill sandboxes.

    \b
    Examples:
      SBX=$(bac sandbox create --timeout 600)
      bac sandbox ls
      bac sandbox rm $SBX
    """


@sandbox.command()
@click.option("-t", "--template", default="base", show_default=True, help="Template id or alias.")
@click.option("--timeout", type=click.IntRange(min=0), default=300, show_default=True,
              help="Seconds until the sandbox is killed (extend with `bac sandbox timeout`; "
                   "0: no end).")
@click.option("-m", "--metadata", multiple=True, metavar="KEY=VALUE", help="Metadata (repeat).")
@click.option("-e", "--env", multiple=True, metavar="KEY=VALUE",
              help="Environment variable for every process in the sandbox (repeat).")
@click.option("--idle-after", type=click.IntRange(min=0), default=None,
              help="Pause it after this many seconds with no traffic and an idle CPU "
                   "(0: never; default: the server's).")
@click.option("--cost-cap", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="AMOUNT", help="Cap its cost over its life, in the server's currency.")
@click.option("--cost-cap-action", type=click.Choice(["pause", "kill"]), default=None,
              help="What reaching --cost-cap does (default: pause).")
@json_option
@click.pass_context
def create(
    ctx: click.Context, template: str, timeout: int, metadata: tuple[str, ...],
    env: tuple[str, ...], idle_after: int | None, cost_cap: float | None,
    cost_cap_action: str | None, as_json: bool,
) -> None:
    """Start a sandbox and print its id.

    \b
    Examples:
      SBX=$(bac sandbox create)
      bac sandbox create -t code-interpreter-v1 --timeout 3600 -m job=demo
      bac sandbox create --timeout 0 --idle-after 600     # no end; paused when idle
    """
    meta = parse_pairs(metadata, "--metadata")
    envs = parse_pairs(env, "--env")
    lifecycle: Lifecycle | None = None if idle_after is None else {"idle_after": idle_after}
    if cost_cap_action is not None and cost_cap is None:
        raise click.UsageError("--cost-cap-action needs --cost-cap")

    async def body() -> AsyncSandbox:
        made = await AsyncSandbox.create(template, timeout, meta, envs, lifecycle=lifecycle,
                                         cost_cap=cost_cap,
                                         cost_cap_action=cast(CapAction | None,
                                                              cost_cap_action),
                                         **connection(ctx))
        await made.aclose()  # the sandbox keeps running; the command's connections end
        return made

    with stderr.status(f"Creating a sandbox from {template!r}…"):
        box = run(body())
    if as_json:
        print_json({"sandboxId": box.sandbox_id, "template": template,
                    "envdVersion": box.envd_version})
    else:
        click.echo(box.sandbox_id)


@sandbox.command(name="list")
@click.option("-m", "--metadata", multiple=True, metavar="KEY=VALUE", help="Filter (repeat).")
@click.option("-s", "--state", type=click.Choice([s.value for s in SandboxState]), multiple=True,
              help="Only sandboxes in this state (repeat).")
@click.option("-t", "--template", default=None, help="Only sandboxes of this template.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Show at most this many.")
@listing_options
@click.pass_context
def list_(
    ctx: click.Context, metadata: tuple[str, ...], state: tuple[str, ...], template: str | None,
    limit: int | None, view: View,
) -> None:
    """List this team's sandboxes, newest first.

    \b
    Examples:
      bac sandbox ls
      bac sandbox ls -s paused -m job=demo
      bac sandbox ls -q | xargs bac sandbox rm      # kill them all
      bac sandbox ls --format json
    """
    query = SandboxQuery(
        metadata=parse_pairs(metadata, "--metadata") or None,
        state=[SandboxState(s) for s in state] or None,
        template=template,
    )

    async def body() -> list[SandboxInfo]:
        found: list[SandboxInfo] = []
        paginator = AsyncSandbox.list(query, **connection(ctx))
        async for info in paginator.all():
            found.append(info)
            if limit is not None and len(found) >= limit:
                break
        return found

    infos = run(body())
    view.show(
        ["ID", "TEMPLATE", "STATE", "STARTED", "ENDS IN", "CPU", "MEM MB", "METADATA"],
        [
            (i.sandbox_id, i.name or i.template_id, _state(i),
             i.started_at.astimezone().strftime("%Y-%m-%d %H:%M:%S"), ends_in(i),
             i.cpu_count, i.memory_mb, " ".join(f"{k}={v}" for k, v in i.metadata.items()))
            for i in infos
        ],
        [info.to_json() for info in infos], empty="no sandboxes",
    )


def _state(info: SandboxInfo) -> str:
    if info.health is SandboxHealth.UNHEALTHY:
        return f"{info.state.value} (unhealthy)"
    return info.state.value


@sandbox.command()
@click.argument("sandbox_id")
@json_option
@click.pass_context
def info(ctx: click.Context, sandbox_id: str, as_json: bool) -> None:
    """Show one sandbox.

    \b
    Examples:
      bac sandbox info $SBX
      bac sandbox info $SBX --format json | jq -r .state
    """
    details = run(AsyncSandbox.get_info(sandbox_id, **connection(ctx)))
    if as_json:
        print_json(details.to_json())
        return
    paused = details.state is SandboxState.PAUSED
    rows = [(key, value) for key, value in details.to_json().items()
            # A paused sandbox's endAt is not an end: resuming sets a new one.
            if key != "metadata" and not (paused and key == "endAt")]
    rows += [(f"metadata.{k}", v) for k, v in details.metadata.items()]
    rows.append(("endsIn", ends_in(details)))
    print_table(details.sandbox_id, ["FIELD", "VALUE"], rows)


@sandbox.command()
@click.argument("sandbox_ids", nargs=-1, required=True)
@click.pass_context
def kill(ctx: click.Context, sandbox_ids: tuple[str, ...]) -> None:
    """Kill sandboxes; fails (exit 4) if one did not exist.

    \b
    Examples:
      bac sandbox kill $SBX
      bac sandbox rm $(bac sandbox ls -q -m job=demo)
    """

    async def body() -> list[str]:
        return [sid for sid in sandbox_ids
                if not await AsyncSandbox.kill(sid, **connection(ctx))]

    missing = run(body())
    for sid in sandbox_ids:
        if sid not in missing:
            stdout.print(f"killed {sid}")
    if missing:
        raise CliError(f"no such sandbox: {', '.join(missing)}", exit_code=4)


@sandbox.command()
@click.argument("sandbox_id")
@click.argument("seconds", type=click.IntRange(min=0))
@click.pass_context
def timeout(ctx: click.Context, sandbox_id: str, seconds: int) -> None:
    """Make SANDBOX_ID end SECONDS from now (0 ends it now).

    \b
    Examples:
      bac sandbox timeout $SBX 3600
    """
    run(AsyncSandbox.set_timeout(sandbox_id, seconds, **connection(ctx)))
    stdout.print(f"{sandbox_id} now ends in {seconds}s")
