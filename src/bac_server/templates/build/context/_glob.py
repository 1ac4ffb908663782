"""What a COPY source names in an unpacked build context, found without following a link.

The context is the tenant's tree and the server reads it as root, so every lookup starts
from the tree's directory fd and goes through ``openat2`` with ``RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS``: a symbolic link in it is listed and matched as an entry of its own,
never entered, whatever it points to (symlinks resolve in the build sandbox only).

Glob patterns match as E2B's SDK matches them on the client: ``*`` and ``?`` within one
path segment, dotfiles included; ``**`` any number of segments. Not entering links also
keeps a link loop in an upload (``a -> .``) from sending the walk through an exponential
number of paths.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
from functools import lru_cache

from bac_server.host._syscalls import openat2

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class ThroughLink(Exception):
    """A source's path goes through a symbolic link of the context (``args[0]``: the
    link, relative to the context)."""


@lru_cache(maxsize=256)
def _segment(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, path[skip:]) for skip in range(len(path) + 1))
    return bool(path) and _segment(head).match(path[0]) is not None \
        and _matches(rest, path[1:])


def _entries(root_fd: int) -> list[tuple[tuple[str, ...], bool]]:
    """Every entry under the tree (path, is a directory), links not entered."""
    found: list[tuple[tuple[str, ...], bool]] = []
    pending: list[tuple[str, ...]] = [()]
    while pending:
        base = pending.pop()
        fd = openat2(root_fd, "/".join(base) or ".", _DIR_FLAGS)
        try:
            with os.scandir(fd) as listing:
                for entry in listing:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    found.append(((*base, entry.name), is_dir))
                    if is_dir:
                        pending.append((*base, entry.name))
        finally:
            os.close(fd)
    return found


def glob_context(root_fd: int, pattern: str) -> list[str]:
    """Entries under ``root_fd`` (relative, sorted) matching ``pattern``, leaving out those
    inside a matched directory (copying the directory copies them)."""
    parts = tuple(p for p in pattern.split("/") if p not in ("", "."))
    found = sorted("/".join(path) for path, _ in _entries(root_fd) if _matches(parts, path))
    kept: list[str] = []
    for entry in found:
        if not any(entry.startswith(parent + "/") for parent in kept):
            kept.append(entry)
    return kept


def entry_exists(root_fd: int, path: str) -> bool:
    """Whether ``path`` (normalized, relative) is an entry of the tree, a link counting as
    one; raises :class:`ThroughLink` when a directory on the way is a link."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        return True
    fd = os.dup(root_fd)
    try:
        for index, part in enumerate(parts[:-1]):
            try:
                step = openat2(fd, part, _DIR_FLAGS)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise ThroughLink("/".join(parts[:index + 1])) from exc
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    return False
                raise
            os.close(fd)
            fd = step
        try:
            os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)  # one name: nothing followed
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True
    finally:
        os.close(fd)
