"""``bac files``: copy files and directories into and out of a sandbox (``cp``, with a
progress bar; :mod:`bac.cli._copy`), and list, print, make and remove them there.

A sandbox path is written ``SANDBOX_ID:PATH`` (``cp`` needs it to tell the two sides
apart; ``ls``, ``cat``, ``mkdir`` and ``rm`` take it too, or the id and paths apart).
Relative sandbox paths are relative to the user's home directory.
"""

from __future__ import annotations

import posixpath
import sys
from typing import TypeVar

import click

from bac import AsyncSandbox, EntryInfo, FileType, PathNotFoundError
from bac.cli._context import in_sandbox
from bac.cli._copy import Copied, download, local_source, upload
from bac.cli._output import BacGroup, CliError, View, listing_options, stdout

T = TypeVar("T")


def split_remote(spec: str) -> tuple[str, str] | None:
    """``SANDBOX:/path`` into its parts; None for a local path."""
    head, sep, tail = spec.partition(":")
    if not sep or not head or "/" in head or not head.isalnum():
        return None
    return head, tail


def _targets(spec: str, paths: tuple[str, ...]) -> tuple[str, list[str]]:
    """The sandbox and paths of ``SANDBOX_ID[:PATH] [[SANDBOX_ID:]PATH]...``."""
    split = split_remote(spec)
    sandbox_id, first = split if split is not None else (spec, "")
    targets = [first] if first else []
    for path in paths:
        other = split_remote(path)
        if other is not None and other[0] != sandbox_id:
            raise click.UsageError(f"{path}: every path must be in sandbox {sandbox_id}")
        targets.append(other[1] if other is not None else path)
    return sandbox_id, targets



def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n} B"


@click.group(cls=BacGroup)
def files() -> None:
    """Copy files in and out of sandboxes; list, print, make and remove them there.

    \b
    Examples:
      bac files cp ./report.csv $SBX:/tmp/
      bac files ls $SBX:/tmp
    """


@files.command()
@click.argument("source")
@click.argument("destination")
@click.option("-r", "--recursive", is_flag=True, help="Copy directories and what they hold.")
@click.pass_context
def cp(ctx: click.Context, source: str, destination: str, recursive: bool) -> None:
    """Copy SOURCE to DESTINATION; exactly one of them is SANDBOX_ID:PATH.

    As cp and docker cp: a DESTINATION that is a directory receives SOURCE under its own
    name; one ending in / is a directory, created if missing. A directory needs -r.

    \b
    Examples:
      bac files cp ./report.csv $SBX:/tmp/            # upload into /tmp
      bac files cp $SBX:/tmp/big.bin ./dl/            # download into ./dl (made if new)
      bac files cp -r ./project $SBX:/home/user/      # a directory, both ways
      bac files cp -r $SBX:/home/user/out ./out
    """
    src, dst = split_remote(source), split_remote(destination)
    if (src is None) == (dst is None):
        raise click.UsageError("exactly one of SOURCE and DESTINATION must be SANDBOX_ID:PATH")
    done: Copied
    if dst is not None:
        local = local_source(source, recursive)
        done = in_sandbox(ctx, dst[0], lambda box: upload(box, local, dst[1]))
        where = f"{dst[0]}:{done.target}"
    else:
        assert src is not None
        done = in_sandbox(ctx, src[0], lambda box: download(box, src[1], destination,
                                                             recursive))
        where = done.target
    count = f" ({done.files} files, {_size(done.size)})" if done.files != 1 else ""
    stdout.print(f"{source} → {where}{count}", highlight=False)


def _entry_row(entry: EntryInfo) -> tuple[str, str, str, str, str, str]:
    kind = entry.type.value if entry.type is not None else "other"
    if entry.symlink_target is not None:
        kind = f"link → {entry.symlink_target}"
    modified = (entry.modified_time.astimezone().strftime("%Y-%m-%d %H:%M")
                if entry.modified_time else "")
    return (entry.name, kind, str(entry.size), entry.permissions,
            f"{entry.owner}:{entry.group}", modified)


def _entry_json(entry: EntryInfo) -> dict[str, object]:
    return {"name": entry.name, "path": entry.path,
            "type": entry.type.value if entry.type else None, "size": entry.size,
            "permissions": entry.permissions, "owner": entry.owner, "group": entry.group,
            "modifiedTime": entry.modified_time.isoformat() if entry.modified_time else None,
            "symlinkTarget": entry.symlink_target}


@files.command()
@click.argument("sandbox")
@click.argument("path", required=False)
@listing_options
@click.pass_context
def ls(ctx: click.Context, sandbox: str, path: str | None, view: View) -> None:
    """List a directory in a sandbox (default: the user's home): SANDBOX_ID[:PATH].

    \b
    Examples:
      bac files ls $SBX:/tmp
      bac files ls $SBX /etc -q | grep ssl
    """
    sandbox_id, paths = _targets(sandbox, (path,) if path else ())
    if len(paths) > 1:
        raise click.UsageError("give one PATH")
    where = paths[0] if paths else "."

    async def body(box: AsyncSandbox) -> list[EntryInfo]:
        entry = await box.files.get_info(where)
        if entry.type is not FileType.DIR:
            return [entry]
        return sorted(await box.files.list(where), key=lambda e: e.name)

    found = in_sandbox(ctx, sandbox_id, body)
    view.show(["NAME", "TYPE", "SIZE", "MODE", "OWNER", "MODIFIED"],
              [_entry_row(e) for e in found], [_entry_json(e) for e in found])


@files.command()
@click.argument("sandbox")
@click.argument("paths", nargs=-1)
@click.pass_context
def cat(ctx: click.Context, sandbox: str, paths: tuple[str, ...]) -> None:
    """Print files in a sandbox, as they are (bytes): SANDBOX_ID:PATH [PATH]...

    \b
    Examples:
      bac files cat $SBX:/etc/os-release
      bac files cat $SBX /tmp/out.json | jq .
    """
    sandbox_id, targets = _targets(sandbox, paths)
    if not targets:
        raise click.UsageError("give a PATH")

    async def body(box: AsyncSandbox) -> None:
        out = sys.stdout.buffer
        for target in targets:
            if (await box.files.get_info(target)).type is FileType.DIR:
                raise CliError(f"{sandbox_id}:{target} is a directory", exit_code=2)
            async with await box.files.read(target, format="stream") as stream:
                async for chunk in stream:
                    out.write(chunk)
            out.flush()

    in_sandbox(ctx, sandbox_id, body)


@files.command()
@click.argument("sandbox")
@click.argument("paths", nargs=-1)
@click.option("-p", "--parents", is_flag=True,
              help="Make missing parents too; one that exists is no error.")
@click.pass_context
def mkdir(ctx: click.Context, sandbox: str, paths: tuple[str, ...], parents: bool) -> None:
    """Make directories in a sandbox: SANDBOX_ID:PATH [PATH]...

    \b
    Examples:
      bac files mkdir $SBX:/tmp/work
      bac files mkdir -p $SBX /tmp/a/b/c /tmp/d
    """
    sandbox_id, targets = _targets(sandbox, paths)
    if not targets:
        raise click.UsageError("give a PATH")

    async def body(box: AsyncSandbox) -> None:
        for target in targets:
            if not parents:
                parent = posixpath.dirname(target.rstrip("/")) or "."
                try:
                    await box.files.get_info(parent)
                except PathNotFoundError:
                    raise CliError(f"{sandbox_id}:{target}: no such directory {parent!r} "
                                   "(-p makes it)", exit_code=4) from None
            if not await box.files.make_dir(target) and not parents:
                raise CliError(f"{sandbox_id}:{target} already exists")

    in_sandbox(ctx, sandbox_id, body)


@files.command()
@click.argument("sandbox")
@click.argument("paths", nargs=-1)
@click.option("-r", "--recursive", is_flag=True, help="Remove directories and their contents.")
@click.option("-f", "--force", is_flag=True, help="A missing path is no error.")
@click.pass_context
def rm(ctx: click.Context, sandbox: str, paths: tuple[str, ...], recursive: bool,
       force: bool) -> None:
    """Remove files (with -r, directories) in a sandbox: SANDBOX_ID:PATH [PATH]...
    Every path is checked before any is removed.

    \b
    Examples:
      bac files rm $SBX:/tmp/big.bin
      bac files rm -rf $SBX /tmp/build /tmp/cache
    """
    sandbox_id, targets = _targets(sandbox, paths)
    if not targets:
        raise click.UsageError("give a PATH")

    async def body(box: AsyncSandbox) -> None:
        present: list[str] = []
        for target in targets:
            try:
                entry = await box.files.get_info(target)
            except PathNotFoundError:
                if force:
                    continue
                raise CliError(f"{sandbox_id}:{target}: no such file or directory",
                               exit_code=4) from None
            if entry.type is FileType.DIR and not recursive:
                raise CliError(f"{sandbox_id}:{target} is a directory (remove it with -r)",
                               exit_code=2)
            present.append(target)
        for target in present:
            await box.files.remove(target)

    in_sandbox(ctx, sandbox_id, body)
