"""``EntryInfo`` as E2B envd builds it: lstat of the path, a symlink described by its target.

For a symlink ``kind``/``mode`` come from the target (``stat``), ``size`` and
``permissions`` from the link itself (Go ``FileMode.String()``, e.g. ``Lrwxrwxrwx``), and
``symlink_target`` is the fully resolved absolute target (the link path itself when it
cannot be resolved, with kind UNKNOWN).
"""

from __future__ import annotations

import enum
import grp
import os
import pwd
import stat
from dataclasses import dataclass, field

from bac_envd import _xattrs
from bac_envd._errors import os_error_text
from bac_envd.filesystem._errors import FsNotFound, from_os


class FileKind(enum.Enum):
    UNKNOWN = 0
    FILE = 1
    DIRECTORY = 2


@dataclass(frozen=True)
class Entry:
    name: str
    kind: FileKind
    path: str
    size: int
    mode: int  # permission bits only
    permissions: str
    owner: str
    group: str
    mtime_ns: int
    symlink_target: str | None
    metadata: dict[str, str] = field(default_factory=dict)


# Go's os.FileMode type letters, most significant bit first.
_TYPE_LETTERS = "dalTLDpSugct?"


def go_file_mode(st_mode: int) -> str:
    """Go's ``FileMode.String()`` for a raw ``st_mode``."""
    fmt = stat.S_IFMT(st_mode)
    flags = {
        "d": fmt == stat.S_IFDIR,
        "L": fmt == stat.S_IFLNK,
        "D": fmt in (stat.S_IFBLK, stat.S_IFCHR),
        "p": fmt == stat.S_IFIFO,
        "S": fmt == stat.S_IFSOCK,
        "u": bool(st_mode & stat.S_ISUID),
        "g": bool(st_mode & stat.S_ISGID),
        "c": fmt == stat.S_IFCHR,
        "t": bool(st_mode & stat.S_ISVTX),
    }
    letters = "".join(c for c in _TYPE_LETTERS if flags.get(c)) or "-"
    perms = "".join(ch if st_mode & (1 << (8 - i)) else "-" for i, ch in enumerate("rwxrwxrwx"))
    return letters + perms


def _kind(st_mode: int) -> FileKind:
    if stat.S_ISREG(st_mode):
        return FileKind.FILE
    if stat.S_ISDIR(st_mode):
        return FileKind.DIRECTORY
    return FileKind.UNKNOWN


class NameCache:
    """uid/gid → name lookups, memoised for the duration of one request."""

    def __init__(self) -> None:
        self._users: dict[int, str] = {}
        self._groups: dict[int, str] = {}

    def owner(self, uid: int) -> str:
        if uid not in self._users:
            try:
                self._users[uid] = pwd.getpwuid(uid).pw_name
            except KeyError:
                self._users[uid] = str(uid)
        return self._users[uid]

    def group(self, gid: int) -> str:
        if gid not in self._groups:
            try:
                self._groups[gid] = grp.getgrgid(gid).gr_name
            except KeyError:
                self._groups[gid] = str(gid)
        return self._groups[gid]


def entry_from_stat(path: str, st: os.stat_result, names: NameCache) -> Entry:
    target: str | None = None
    kind = _kind(st.st_mode)
    mode = stat.S_IMODE(st.st_mode) & 0o777
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(path)
        try:
            target_st = os.stat(target)
        except OSError:
            kind, mode, target = FileKind.UNKNOWN, 0, path
        else:
            kind, mode = _kind(target_st.st_mode), stat.S_IMODE(target_st.st_mode) & 0o777
    return Entry(
        name=os.path.basename(path) or path,
        kind=kind,
        path=path,
        size=st.st_size,
        mode=mode,
        permissions=go_file_mode(st.st_mode),
        owner=names.owner(st.st_uid),
        group=names.group(st.st_gid),
        mtime_ns=st.st_mtime_ns,
        symlink_target=target,
        metadata=_xattrs.read(path),
    )


def entry_info(path: str, names: NameCache | None = None) -> Entry:
    try:
        st = os.lstat(path)
    except FileNotFoundError as exc:
        raise FsNotFound(f"file not found: {path}") from exc
    except NotADirectoryError as exc:
        raise FsNotFound(f"file not found: {path}") from exc
    except OSError as exc:
        raise from_os(f"error getting file info: {os_error_text(exc)}", exc) from exc
    return entry_from_stat(path, st, names or NameCache())
