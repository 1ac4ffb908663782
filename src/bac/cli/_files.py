"""``bac files cp``: copy a file into or out of a sandbox, with a progress bar.

``bac files cp ./local SBX:/path`` uploads, ``bac files cp SBX:/path ./local``
downloads. Relative sandbox paths are relative to the user's home directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import click
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TransferSpeedColumn,
)

from bac import AsyncSandbox, FileType, PathNotFoundError
from bac.cli._context import connection, run
from bac.cli._output import BacGroup, CliError, stderr, stdout

CHUNK = 1 << 20


def split_remote(spec: str) -> tuple[str, str] | None:
    """``SANDBOX:/path`` into its parts; None for a local path."""
    head, sep, tail = spec.partition(":")
    if not sep or not head or "/" in head or not head.isalnum():
        return None
    return head, tail


def _progress() -> Progress:
    return Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(),
        TransferSpeedColumn(), console=stderr, transient=True,
    )


async def _local_chunks(path: Path, progress: Progress, task: TaskID) -> AsyncIterator[bytes]:
    with path.open("rb") as source:
        while chunk := await asyncio.to_thread(source.read, CHUNK):
            progress.advance(task, len(chunk))
            yield chunk


async def upload(
    ctx: click.Context, local: Path, size: int, sandbox_id: str, remote: str
) -> str:
    box = await AsyncSandbox.attach(sandbox_id, **connection(ctx))
    try:
        target = remote or local.name
        try:
            is_dir = (await box.files.get_info(target)).type is FileType.DIR
        except PathNotFoundError:
            is_dir = False
        if is_dir or target.endswith("/"):
            target = target.rstrip("/") + "/" + local.name
        with _progress() as progress:
            task = progress.add_task(f"→ {target}", total=size)
            written = await box.files.write(target, _local_chunks(local, progress, task))
        return written.path
    finally:
        await box.aclose()


async def download(
    ctx: click.Context, sandbox_id: str, remote: str, local: Path, into_dir: bool
) -> Path:
    box = await AsyncSandbox.attach(sandbox_id, **connection(ctx))
    try:
        entry = await box.files.get_info(remote)
        if entry.type is FileType.DIR:
            raise CliError(f"{sandbox_id}:{remote} is a directory", exit_code=2)
        target = local / entry.name if into_dir else local
        partial = target.with_name(f".{target.name}.bac-partial")
        with _progress() as progress:
            task = progress.add_task(f"← {entry.path}", total=entry.size)
            try:
                async with await box.files.read(remote, format="stream") as stream:
                    with partial.open("wb") as sink:
                        async for chunk in stream:
                            await asyncio.to_thread(sink.write, chunk)
                            progress.advance(task, len(chunk))
                os.replace(partial, target)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(partial)
        return target
    finally:
        await box.aclose()


@click.group(cls=BacGroup)
def files() -> None:
    """Move files in and out of sandboxes."""


@files.command()
@click.argument("source")
@click.argument("destination")
@click.pass_context
def cp(ctx: click.Context, source: str, destination: str) -> None:
    """Copy SOURCE to DESTINATION; exactly one of them is SANDBOX_ID:PATH."""
    src, dst = split_remote(source), split_remote(destination)
    if (src is None) == (dst is None):
        raise click.UsageError("exactly one of SOURCE and DESTINATION must be SANDBOX_ID:PATH")
    if dst is not None:
        local = Path(source)
        if not local.is_file():
            raise CliError(f"{source}: not a regular file", exit_code=2)
        path = run(upload(ctx, local, local.stat().st_size, *dst))
        stdout.print(f"{source} → {dst[0]}:{path}")
    else:
        assert src is not None
        local = Path(destination)
        target = run(download(ctx, src[0], src[1], local, local.is_dir()))
        stdout.print(f"{source} → {target}")
