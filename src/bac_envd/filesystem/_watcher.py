"""Directory watching on inotify, optionally recursive (directories created later included).

inotify → event type, as E2B envd's fsnotify reports them: IN_CREATE/IN_MOVED_TO →
CREATE, IN_MODIFY → WRITE, IN_ATTRIB → CHMOD, IN_DELETE/IN_DELETE_SELF → REMOVE,
IN_MOVED_FROM/IN_MOVE_SELF → RENAME. Event names are relative to the watched directory
(``nested/file.txt``). ``*_SELF`` events are reported only for the watched root; for
sub-directories their parent's event already names them.

A directory that appears inside a recursive watch is watched as soon as its CREATE is
seen; entries made in it before that watch existed are reported as CREATE once.
"""

from __future__ import annotations

import asyncio
import enum
import os
from collections.abc import Callable
from dataclasses import dataclass

import inotify_simple as _in  # type: ignore[import-untyped]

F = _in.flags
_MASK = (
    F.CREATE
    | F.MODIFY
    | F.ATTRIB
    | F.DELETE
    | F.DELETE_SELF
    | F.MOVED_FROM
    | F.MOVED_TO
    | F.MOVE_SELF
)
_SELF = F.DELETE_SELF | F.MOVE_SELF


class FsEventType(enum.Enum):
    CREATE = 1
    WRITE = 2
    REMOVE = 3
    RENAME = 4
    CHMOD = 5


# Order matches fsnotify's, which E2B envd emits one event per op in.
_OPS = (
    (F.CREATE | F.MOVED_TO, FsEventType.CREATE),
    (F.MOVED_FROM | F.MOVE_SELF, FsEventType.RENAME),
    (F.ATTRIB, FsEventType.CHMOD),
    (F.MODIFY, FsEventType.WRITE),
    (F.DELETE | F.DELETE_SELF, FsEventType.REMOVE),
)


@dataclass(frozen=True)
class FsEvent:
    name: str  # relative to the watched root
    path: str  # absolute
    type: FsEventType


class DirWatcher:
    def __init__(self, root: str, recursive: bool, sink: Callable[[FsEvent], None]) -> None:
        self.root = root
        self.recursive = recursive
        self._sink = sink
        import inotify_simple

        self._inotify = inotify_simple.INotify(nonblocking=True)
        self._dirs: dict[int, str] = {}
        self._loop = asyncio.get_running_loop()
        self.closed = False
        try:
            self._watch(root, announce=False)
        except BaseException:
            self._inotify.close()
            raise
        self._loop.add_reader(self._inotify.fileno(), self._on_readable)

    def _watch(self, directory: str, announce: bool) -> None:
        try:
            wd = self._inotify.add_watch(directory, _MASK | F.DONT_FOLLOW | F.ONLYDIR)
        except OSError:
            if directory == self.root:
                raise
            return  # vanished before we got to it
        self._dirs[wd] = directory
        if not self.recursive:
            return
        try:
            with os.scandir(directory) as it:
                children = list(it)
        except OSError:
            return
        for child in children:
            if announce:
                self._emit(child.path, FsEventType.CREATE)
            if child.is_dir(follow_symlinks=False):
                self._watch(child.path, announce)

    def _emit(self, path: str, kind: FsEventType) -> None:
        self._sink(FsEvent(os.path.relpath(path, self.root), path, kind))

    def _on_readable(self) -> None:
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            return
        for event in events:
            directory = self._dirs.get(event.wd)
            if directory is None:
                continue
            if event.mask & F.IGNORED:
                del self._dirs[event.wd]
                continue
            if event.mask & _SELF and directory != self.root:
                continue
            path = os.path.join(directory, event.name) if event.name else directory
            for bits, kind in _OPS:
                if event.mask & bits:
                    self._emit(path, kind)
            if self.recursive and event.mask & F.ISDIR and event.mask & (F.CREATE | F.MOVED_TO):
                self._watch(path, announce=True)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._loop.remove_reader(self._inotify.fileno())
        self._inotify.close()
