"""The files a COPY step sends: chosen from the context, hashed, packed as a tar.gz.

The hash keys the server's upload cache and the step's layer cache, so it covers exactly
what the copy depends on: the source as written, the destination, and for every selected
file, directory or symlink (sorted) its context-relative path, type, permission bits and
content (a symlink's target). Owners and modification times are left out, so the same
files hash the same on any machine. The archive holds the same entries under the same
relative paths (owned by root), which is what E2B's upload format is too.

A source's wildcards are matched as BuildKit matches them, by Go's ``filepath.Match``:
``*`` and ``?`` within one path segment, ``[a-z]`` a class (``[^a-z]`` its complement),
``\\`` escapes. This stays hand-written: e2b-dockerfile-utils has only ``.dockerignore``'s
matcher, whose rules are not a source's (there a pattern matching a directory matches all
below it, ``#`` starts a comment, ``!`` an exception and ``**`` spans segments).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bac._template._dockerignore import IgnoreRules
from bac._template._errors import DockerfileError, Origin

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Selected:
    relative: str  # posix, relative to the context
    path: Path
    mode: int  # lstat st_mode


def _walk(context: Path, top: str, rules: IgnoreRules) -> list[Selected]:
    """``top`` (``""``: the context itself, not listed) and everything under it that the
    rules keep."""
    found: list[Selected] = []
    pending = [top]
    while pending:
        relative = pending.pop()
        path = context / relative if relative else context
        mode = path.lstat().st_mode
        if relative and not rules.ignored(relative):
            found.append(Selected(relative, path, mode))
        elif relative and not (stat.S_ISDIR(mode) and rules.may_keep_under(relative)):
            continue  # excluded, and nothing under it can be re-included
        if stat.S_ISDIR(mode):
            with os.scandir(path) as entries:
                pending.extend(f"{relative}/{e.name}" if relative else e.name
                               for e in entries)
    return found


def _wildcards(src: str, origin: Origin | None) -> re.Pattern[str]:
    """A source's wildcards as a regex over context-relative paths (``filepath.Match``)."""
    out: list[str] = []
    index = 0
    while index < len(src):
        char = src[index]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = src.find("]", index + 2)
            if end < 0:
                raise DockerfileError(f"COPY source {src!r} has an unterminated [", origin)
            out.append("[" + src[index + 1 : end].replace("\\", "\\\\") + "]")
            index = end
        elif char == "\\" and index + 1 < len(src):
            index += 1
            out.append(re.escape(src[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out))


def _glob_matches(context: Path, pattern: re.Pattern[str], depth: int) -> list[str]:
    """Context-relative paths exactly ``depth`` segments deep that match ``pattern``."""
    level = [""]
    for _ in range(depth):
        deeper: list[str] = []
        for parent in level:
            directory = context / parent if parent else context
            if not directory.is_dir() or directory.is_symlink():
                continue
            with os.scandir(directory) as entries:
                deeper.extend(f"{parent}/{e.name}" if parent else e.name for e in entries)
        level = deeper
    return sorted(path for path in level if pattern.fullmatch(path))


def select(context: Path, src: str, rules: IgnoreRules,
           origin: Origin | None = None) -> list[Selected]:
    """What ``COPY src`` copies, sorted; a clear error when it is nothing."""
    if src in ("", "."):
        tops = [""]
    elif any(ch in src for ch in "*?["):
        tops = _glob_matches(context, _wildcards(src, origin), src.count("/") + 1)
    else:
        tops = [src] if os.path.lexists(context / src) else []
        if not tops:
            raise DockerfileError(f"COPY source {src!r} not found in the context {context}",
                                  origin)
    found: dict[str, Selected] = {}
    for top in tops:
        for item in _walk(context, top, rules):
            found[item.relative] = item
    if not found:
        why = "is excluded by .dockerignore" if tops else "matches no file"
        raise DockerfileError(f"COPY source {src!r} {why} in the context {context}", origin)
    return [found[key] for key in sorted(found)]


def files_hash(src: str, dest: str, selected: list[Selected]) -> str:
    """Lowercase hex sha256 of what the copy depends on (see the module docstring)."""
    digest = hashlib.sha256(b"bac-copy-v1\0")
    digest.update(f"{src}\0{dest}\0".encode())
    for item in selected:
        kind = "d" if stat.S_ISDIR(item.mode) else "l" if stat.S_ISLNK(item.mode) else "f"
        digest.update(f"{item.relative}\0{kind}{stat.S_IMODE(item.mode):04o}\0".encode())
        if kind == "l":
            digest.update(os.readlink(item.path).encode() + b"\0")
        elif kind == "f":
            with item.path.open("rb") as file:
                while chunk := file.read(_CHUNK):
                    digest.update(chunk)
            digest.update(b"\0")
    return digest.hexdigest()


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack(selected: list[Selected]) -> IO[bytes]:
    """A tar.gz of ``selected`` in a temporary file (deleted on close), rewound."""
    spool = tempfile.TemporaryFile()
    try:
        with tarfile.open(fileobj=spool, mode="w:gz", compresslevel=6) as archive:
            for item in selected:
                archive.add(item.path, arcname=item.relative, recursive=False,
                            filter=_as_root)
        spool.seek(0)
        return spool
    except BaseException:
        spool.close()
        raise
