"""``bac sandbox pause|resume|checkpoint|checkpoints|restore|fork|snapshot``: saving and
bringing back a sandbox's state (added to the ``bac sandbox`` group)."""

from __future__ import annotations

import click

from bac import AsyncSandbox, SandboxError, SandboxInfo, SandboxState
from bac.cli._context import attach, connection, ends_in, in_sandbox, run
from bac.cli._output import CliError, View, json_option, listing_options, print_json, stderr, stdout


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@click.command()
@click.argument("sandbox_id")
@click.option("--no-memory", is_flag=True,
              help="Keep the files only; resuming starts the sandbox afresh.")
@click.pass_context
def pause(ctx: click.Context, sandbox_id: str, no_memory: bool) -> None:
    """Pause SANDBOX_ID: its processes, memory and files are saved, its memory freed.
    A paused sandbox never expires; resume it with `bac sandbox resume` (or any command
    that uses it, such as `bac exec`, which resumes it as E2B's connect does).

    \b
    Examples:
      bac sandbox pause $SBX
      bac sandbox pause $SBX --no-memory       # files only: resuming starts it afresh
    """
    with stderr.status(f"Pausing {sandbox_id}…"):
        changed = run(AsyncSandbox.pause(sandbox_id, not no_memory, **connection(ctx)))
    stdout.print(f"paused {sandbox_id}" if changed else f"{sandbox_id} was already paused")


@click.command()
@click.argument("sandbox_id")
@click.option("--timeout", type=click.IntRange(min=1), default=None,
              help="Seconds until it times out again (default: the server's).")
@click.option("--reboot", is_flag=True, help="Start it afresh on its files instead.")
@click.pass_context
def resume(ctx: click.Context, sandbox_id: str, timeout: int | None, reboot: bool) -> None:
    """Resume SANDBOX_ID (same id, processes and files). A running one is left as it is,
    said so; with --timeout its end moves out (never in).

    \b
    Examples:
      bac sandbox resume $SBX
      bac sandbox resume $SBX --timeout 3600
    """
    opts = connection(ctx)

    async def body() -> tuple[bool, SandboxInfo]:
        info = await AsyncSandbox.get_info(sandbox_id, **opts)
        resumed = info.state is not SandboxState.RUNNING
        if resumed:
            await AsyncSandbox.resume(sandbox_id, timeout, not reboot, **opts)
        elif timeout is not None:  # what resume does to a running sandbox: extend it
            await AsyncSandbox.resume(sandbox_id, timeout, **opts)
        return resumed, await AsyncSandbox.get_info(sandbox_id, **opts)

    with stderr.status(f"Resuming {sandbox_id}…"):
        resumed, now = run(body())
    said = f"resumed {sandbox_id}" if resumed else f"{sandbox_id} is already running"
    stdout.print(f"{said}; it ends in {ends_in(now)}", highlight=False)


@click.command()
@click.argument("sandbox_id")
@click.option("-n", "--name", default=None, help="A name for the checkpoint.")
@click.option("--no-memory", is_flag=True, help="Save the files only.")
@json_option
@click.pass_context
def checkpoint(ctx: click.Context, sandbox_id: str, name: str | None, no_memory: bool,
               as_json: bool) -> None:
    """Save SANDBOX_ID's state now (it keeps running); print the checkpoint id.

    \b
    Examples:
      bac sandbox checkpoint $SBX -n before-upgrade
      bac sandbox restore $SBX before-upgrade
    """

    with stderr.status(f"Checkpointing {sandbox_id}…"):
        saved = in_sandbox(ctx, sandbox_id,
                           lambda box: box.checkpoint(name, memory=not no_memory))
    if as_json:
        print_json(saved.to_json())
    else:
        click.echo(saved.checkpoint_id)


@click.command()
@click.argument("sandbox_id")
@listing_options
@click.pass_context
def checkpoints(ctx: click.Context, sandbox_id: str, view: View) -> None:
    """List SANDBOX_ID's checkpoints, oldest first, with the disk each uses.

    \b
    Examples:
      bac sandbox checkpoints $SBX
      bac sandbox checkpoints $SBX -q | tail -1      # the newest checkpoint's id
    """

    found = run(AsyncSandbox.checkpoints(sandbox_id, **connection(ctx)))
    view.show(["ID", "NAME", "TAKEN", "SIZE", "MEMORY"], [
        (c.checkpoint_id, c.name or "", c.created_at.astimezone().strftime("%Y-%m-%d %H:%M:%S"),
         _size(c.size_bytes), "yes" if c.memory else "no") for c in found],
        [c.to_json() for c in found], empty="no checkpoints")


@click.command()
@click.argument("sandbox_id")
@click.argument("checkpoint")
@click.pass_context
def restore(ctx: click.Context, sandbox_id: str, checkpoint: str) -> None:
    """Roll SANDBOX_ID back to CHECKPOINT, its id or its name (files, processes and
    memory); a paused sandbox is running afterwards.

    \b
    Examples:
      bac sandbox restore $SBX before-upgrade
      bac sandbox restore $SBX c4f1e2d3a4b5c6d7e
    """

    with stderr.status(f"Restoring {sandbox_id}…"):
        run(AsyncSandbox.restore(sandbox_id, checkpoint, **connection(ctx)))
    stdout.print(f"{sandbox_id} restored to {checkpoint}")


@click.command()
@click.argument("sandbox_id")
@click.option("-c", "--count", type=click.IntRange(1, 20), default=1, show_default=True)
@click.option("--timeout", type=click.IntRange(min=1), default=None,
              help="Timeout of the new sandboxes in seconds.")
@json_option
@click.pass_context
def fork(ctx: click.Context, sandbox_id: str, count: int, timeout: int | None,
         as_json: bool) -> None:
    """Start COUNT new sandboxes from SANDBOX_ID's current state; print their ids.

    \b
    Examples:
      bac sandbox fork $SBX -c 3
    """

    async def body() -> list[str | SandboxError]:
        box = await attach(ctx, sandbox_id)
        try:
            forks = await box.fork(count, timeout)
        finally:
            await box.aclose()
        out: list[str | SandboxError] = []
        for made in forks:
            if isinstance(made, SandboxError):
                out.append(made)
            else:
                out.append(made.sandbox_id)
                await made.aclose()
        return out

    with stderr.status(f"Forking {sandbox_id}…"):
        results = run(body())
    if as_json:
        print_json([r if isinstance(r, str) else {"error": str(r)} for r in results])
    else:
        for r in results:
            click.echo(r if isinstance(r, str) else f"error: {r}")
    if all(isinstance(r, SandboxError) for r in results):
        raise CliError("no fork started", exit_code=1)


@click.command()
@click.argument("sandbox_id")
@click.option("-n", "--name", default=None, help="A name to start sandboxes from it by.")
@click.option("--no-memory", is_flag=True, help="Save the files only.")
@json_option
@click.pass_context
def snapshot(ctx: click.Context, sandbox_id: str, name: str | None, no_memory: bool,
             as_json: bool) -> None:
    """Snapshot SANDBOX_ID (it keeps running); `bac sandbox create -t SNAPSHOT_ID` starts
    new sandboxes from it. Prints the snapshot id.

    \b
    Examples:
      SNAP=$(bac sandbox snapshot $SBX -n warmed-up)
      bac sandbox create -t warmed-up
    """

    with stderr.status(f"Snapshotting {sandbox_id}…"):
        taken = in_sandbox(ctx, sandbox_id,
                           lambda box: box.snapshot(name, memory=not no_memory))
    snapshot_id, names = taken.snapshot_id, taken.names
    if as_json:
        print_json({"snapshotId": snapshot_id, "names": names})
    else:
        click.echo(snapshot_id)


STATE_COMMANDS = [pause, resume, checkpoint, checkpoints, restore, fork, snapshot]
