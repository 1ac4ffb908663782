"""Glob patterns of COPY sources, matched in an unpacked build context without following
symbolic links (as E2B's SDK matches them on the client: ``*`` and ``?`` within one path
segment, dotfiles included; ``**`` any number of segments).

Walking the tree instead of calling ``glob.glob`` keeps a link loop in an upload (``a ->
.``) from sending the server through an exponential number of paths.
"""

from __future__ import annotations

import fnmatch
import os
import re
from functools import lru_cache
from pathlib import Path


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


def glob_context(context: Path, pattern: str) -> list[str]:
    """Entries of ``context`` (relative, sorted) matching ``pattern``, leaving out those
    inside a matched directory (copying the directory copies them)."""
    parts = tuple(p for p in pattern.split("/") if p not in ("", "."))
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(context):  # links are not followed
        relative = os.path.relpath(dirpath, context)
        base = () if relative == "." else tuple(relative.split(os.sep))
        for name in sorted(dirnames + filenames):
            if _matches(parts, (*base, name)):
                found.append("/".join((*base, name)))
    found.sort()
    kept: list[str] = []
    for entry in found:
        if not any(entry.startswith(parent + "/") for parent in kept):
            kept.append(entry)
    return kept
