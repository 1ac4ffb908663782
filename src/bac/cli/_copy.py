"""What ``bac files cp`` copies where, as ``cp -r`` and ``docker cp`` decide it, and the
copying itself, with one progress bar over all the bytes.

A destination that is an existing directory, or that ends with ``/``, receives the source
under its own name (a missing one is created, as ``rsync`` creates it); otherwise the
destination is the copy's own path. A directory is copied only with ``-r``: into a new
destination it becomes that destination, into an existing directory it goes under its
own name. Local files are written beside their target and renamed into place, so an
interrupted download never leaves a truncated file under the real name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TransferSpeedColumn

from bac import AsyncSandbox, EntryInfo, FileType, PathNotFoundError
from bac.cli._output import CliError, stderr

CHUNK = 1 << 20


@dataclass(frozen=True)
class Copied:
    """What a copy did: where the source went, how many files and bytes."""

    target: str
    files: int
    size: int


def _progress() -> Progress:
    return Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(),
        TransferSpeedColumn(), console=stderr, transient=True,
        disable=not stderr.is_terminal,  # a log file gets no bar, not blank lines
    )


def _is_dir_spec(path: str) -> bool:
    return path.endswith("/") or path.endswith("/.") or path in (".", "..", "")


async def _remote_entry(box: AsyncSandbox, path: str) -> EntryInfo | None:
    try:
        return await box.files.get_info(path)
    except PathNotFoundError:
        return None


# -- upload: local → sandbox ---------------------------------------------------------------


@dataclass(frozen=True)
class LocalSource:
    """A local file, or a directory's tree, read before any byte moves."""

    path: Path
    name: str
    is_dir: bool
    dirs: list[str]  # relative, parents first
    files: list[tuple[Path, str, int]]  # path, relative path, size

    @property
    def size(self) -> int:
        return sum(size for _, _, size in self.files)


def local_source(spec: str, recursive: bool) -> LocalSource:
    """What uploading ``spec`` means; symbolic links to files are copied as files, other
    links are left out (a link to a directory could loop)."""
    path = Path(spec)
    if not path.exists():
        raise CliError(f"{spec}: no such file or directory", exit_code=4)
    name = path.resolve().name
    if path.is_file():
        return LocalSource(path, name, False, [], [(path, name, path.stat().st_size)])
    if not path.is_dir():
        raise CliError(f"{spec}: not a regular file or directory", exit_code=2)
    if not recursive:
        raise CliError(f"{spec} is a directory (copy it with -r)", exit_code=2)
    dirs: list[str] = []
    files: list[tuple[Path, str, int]] = []
    for here, subdirs, names in os.walk(path):
        rel = os.path.relpath(here, path)
        subdirs[:] = sorted(d for d in subdirs if not (Path(here) / d).is_symlink())
        dirs.extend(os.path.normpath(os.path.join(rel, d)) for d in subdirs)
        for file_name in sorted(names):
            found = Path(here) / file_name
            if found.is_file():
                files.append((found, os.path.normpath(os.path.join(rel, file_name)),
                              found.stat().st_size))
    return LocalSource(path, name, True, dirs, files)


async def _local_chunks(path: Path, progress: Progress, task: TaskID) -> AsyncIterator[bytes]:
    with path.open("rb") as source:
        while chunk := await asyncio.to_thread(source.read, CHUNK):
            progress.advance(task, len(chunk))
            yield chunk


async def upload(box: AsyncSandbox, source: LocalSource, remote: str) -> Copied:
    """Copy ``source`` to ``remote`` in the sandbox."""
    found = await _remote_entry(box, remote) if remote else None
    into = _is_dir_spec(remote) or (found is not None and found.type is FileType.DIR)
    if found is not None and found.type is not FileType.DIR and (source.is_dir or into):
        raise CliError(f"{box.sandbox_id}:{remote} exists and is not a directory", exit_code=2)
    base = remote.rstrip("/") or ("/" if remote else "")
    target = (posixpath.join(base, source.name) if base else source.name) if into else base
    with _progress() as progress:
        task = progress.add_task(f"→ {target}", total=source.size)
        if not source.is_dir:
            written = await box.files.write(target,
                                            _local_chunks(source.path, progress, task))
            return Copied(written.path, 1, source.size)
        await box.files.make_dir(target)
        for rel in source.dirs:
            await box.files.make_dir(posixpath.join(target, rel))
        for path, rel, _ in source.files:
            await box.files.write(posixpath.join(target, rel),
                                  _local_chunks(path, progress, task))
    placed = await box.files.get_info(target)
    return Copied(placed.path, len(source.files), source.size)


# -- download: sandbox → local -------------------------------------------------------------


async def _remote_tree(box: AsyncSandbox, root: str) -> tuple[list[str], list[EntryInfo]]:
    """Directories (relative, parents first) and files under ``root`` in the sandbox;
    entries that are neither (sockets, devices) are left out."""
    dirs: list[str] = []
    files: list[EntryInfo] = []
    pending = [root]
    while pending:
        here = pending.pop(0)
        for entry in sorted(await box.files.list(here), key=lambda e: e.name):
            if entry.symlink_target is not None and entry.type is FileType.DIR:
                continue  # a link to a directory could loop
            if entry.type is FileType.DIR:
                dirs.append(posixpath.relpath(entry.path, root))
                pending.append(entry.path)
            elif entry.type is FileType.FILE:
                files.append(entry)
    return dirs, files


async def _fetch(box: AsyncSandbox, remote: str, target: Path, progress: Progress,
                 task: TaskID) -> None:
    partial = target.with_name(f".{target.name}.bac-partial")
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


def _local_target(spec: str, name: str, source_is_dir: bool) -> Path:
    """Where a download of something called ``name`` goes for the destination ``spec``."""
    local = Path(spec)
    if local.is_dir():
        return local / name
    if local.exists():
        if source_is_dir:
            raise CliError(f"{spec} exists and is not a directory", exit_code=2)
        return local
    if _is_dir_spec(spec):
        local.mkdir(parents=True)  # a trailing slash names a directory: make it
        return local / name
    if not local.parent.is_dir():
        raise CliError(f"{spec}: no such directory {str(local.parent)!r}", exit_code=4)
    return local


def _make_dirs(root: Path, dirs: list[str]) -> None:
    root.mkdir(exist_ok=True)
    for rel in dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)


async def download(box: AsyncSandbox, remote: str, local: str, recursive: bool) -> Copied:
    """Copy the file or directory ``remote`` in the sandbox to the local path ``local``."""
    entry = await box.files.get_info(remote)
    is_dir = entry.type is FileType.DIR
    if is_dir and not recursive:
        raise CliError(f"{box.sandbox_id}:{remote} is a directory (copy it with -r)",
                       exit_code=2)
    target = _local_target(local, entry.name, is_dir)
    if not is_dir:
        with _progress() as progress:
            task = progress.add_task(f"← {entry.path}", total=entry.size)
            await _fetch(box, entry.path, target, progress, task)
        return Copied(str(target), 1, entry.size)
    dirs, files = await _remote_tree(box, entry.path)
    total = sum(f.size for f in files)
    _make_dirs(target, dirs)
    with _progress() as progress:
        task = progress.add_task(f"← {entry.path}", total=total)
        for found in files:
            await _fetch(box, found.path, target / posixpath.relpath(found.path, entry.path),
                         progress, task)
    return Copied(str(target), len(files), total)
