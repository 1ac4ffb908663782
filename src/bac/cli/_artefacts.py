"""``bac artefacts``: a sandbox's file or directory promoted to an artefact of a run (kept
on the server after the sandbox ends, idempotently), and a run's artefacts listed,
downloaded and deleted."""

from __future__ import annotations

import sys

import click

from bac import Artefact, AsyncArtefacts
from bac.cli._context import connection, run
from bac.cli._output import BacGroup, View, json_option, listing_options, print_json

_RUN = click.option("--run", "run_id", required=True, metavar="RUN_ID",
                    help="The run the artefact belongs to.")


@click.group(cls=BacGroup)
def artefacts() -> None:
    """Promote a sandbox's files and directories to artefacts of a run, and list,
    download and delete a run's artefacts. Promoting the same content again under a name
    changes nothing; other content under it is refused (exit code 1).

    \b
    Examples:
      bac artefacts promote $SBX /home/user/out/report.json report.json --run run-42
      bac artefacts ls --run run-42
      bac artefacts get run-42 report.json -o report.json
    """


def _row(a: Artefact) -> tuple[str, ...]:
    return (a.name, a.kind, str(a.size_bytes), a.sha256[:16], a.sandbox_id, a.path,
            a.created_at.strftime("%Y-%m-%d %H:%M:%S"))


_COLUMNS = ["name", "kind", "bytes", "sha256", "sandbox", "path", "created"]


@artefacts.command()
@click.argument("sandbox_id")
@click.argument("path")
@click.argument("name")
@_RUN
@json_option
@click.pass_context
def promote(ctx: click.Context, sandbox_id: str, path: str, name: str, run_id: str,
            as_json: bool) -> None:
    """Copy PATH (a file, or a directory as a tar) out of sandbox SANDBOX_ID into the
    run's artefacts as NAME; print its sha256.

    \b
    Examples:
      bac artefacts promote $SBX out/model.bin model.bin --run run-42
      bac artefacts promote $SBX /home/user/results results --run run-42 --json
    """

    async def body() -> Artefact:
        async with AsyncArtefacts(**connection(ctx)) as client:
            return await client.promote(sandbox_id, path, name, run_id=run_id)

    done = run(body())
    if as_json:
        print_json(done.to_json())
        return
    what = "promoted" if done.created else "already promoted (same content)"
    click.echo(f"{what}: {done.run_id}/{done.name} {done.kind} {done.size_bytes} bytes "
               f"sha256 {done.sha256}")


@artefacts.command(name="list")
@_RUN
@listing_options
@click.pass_context
def list_(ctx: click.Context, run_id: str, view: View) -> None:
    """The run's artefacts, oldest first.

    \b
    Examples:
      bac artefacts ls --run run-42
      bac artefacts ls --run run-42 -q
    """

    async def body() -> list[Artefact]:
        async with AsyncArtefacts(**connection(ctx)) as client:
            return await client.list(run_id)

    found = run(body())
    view.show(_COLUMNS, [_row(a) for a in found], [a.to_json() for a in found],
              empty=f"no artefacts in run {run_id}")


@artefacts.command()
@click.argument("run_id")
@click.argument("name")
@click.option("-o", "--output", default=None, metavar="FILE",
              help="Where to write it (default: NAME here; - for stdout). A directory "
                   "comes as a tar.")
@click.pass_context
def get(ctx: click.Context, run_id: str, name: str, output: str | None) -> None:
    """Download artefact NAME of run RUN_ID.

    \b
    Examples:
      bac artefacts get run-42 report.json
      bac artefacts get run-42 results -o - | tar -t
    """

    async def body() -> None:
        async with AsyncArtefacts(**connection(ctx)) as client:
            if output == "-":
                sys.stdout.buffer.write(await client.download(run_id, name))
                sys.stdout.buffer.flush()
            else:
                await client.download_to(run_id, name, output or name)

    run(body())


@artefacts.command(name="delete")
@click.argument("run_id")
@click.argument("name")
@click.pass_context
def delete(ctx: click.Context, run_id: str, name: str) -> None:
    """Delete artefact NAME of run RUN_ID.

    \b
    Examples:
      bac artefacts rm run-42 report.json
    """

    async def body() -> None:
        async with AsyncArtefacts(**connection(ctx)) as client:
            await client.delete(run_id, name)

    run(body())
