"""Blocking twin of the filesystem module: reads, writes, listings and polled watches.

Each method runs the async implementation on the portal loop; see :mod:`bac._portal`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import IO, Any, Literal, overload

from bac._files import DEFAULT_WATCH_TIMEOUT, AsyncFilesystem
from bac._models import EntryInfo, FilesystemEvent, WriteInfo
from bac._portal import PORTAL
from bac._transfer import AsyncFileStream, WriteData, WriteEntry
from bac._watch import AsyncWatchHandle

SyncWriteData = str | bytes | IO[bytes] | IO[str] | Iterable[bytes]


class FileStream(Iterator[bytes]):
    """A file's bytes as they arrive; close it (or use ``with``) when done."""

    def __init__(self, inner: AsyncFileStream) -> None:
        self._inner = inner

    def __next__(self) -> bytes:
        try:
            return PORTAL.run(anext(self._inner))
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        PORTAL.run(self._inner.aclose())

    def __enter__(self) -> FileStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class WatchHandle:
    """A directory watch whose events queue up until :meth:`get_new_events` drains them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[FilesystemEvent] = []
        self._inner: AsyncWatchHandle | None = None

    def _collect(self, event: FilesystemEvent) -> None:
        with self._lock:
            self._events.append(event)

    def get_new_events(self) -> list[FilesystemEvent]:
        """Events since the last call, oldest first."""
        with self._lock:
            drained, self._events = self._events, []
        return drained

    def stop(self) -> None:
        if self._inner is not None:
            PORTAL.run(self._inner.stop())


async def _from_sync(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    iterator = iter(chunks)
    while (chunk := await asyncio.to_thread(next, iterator, None)) is not None:
        yield chunk


def _async_data(data: SyncWriteData) -> WriteData:
    if isinstance(data, str | bytes) or hasattr(data, "read"):
        return data  # type: ignore[return-value]
    return _from_sync(data)


class Filesystem:
    """Blocking twin of :class:`AsyncFilesystem`."""

    def __init__(self, inner: AsyncFilesystem) -> None:
        self._inner = inner

    @overload
    def read(self, path: str, format: Literal["text"] = "text", user: str | None = None,
             request_timeout: float | None = None) -> str: ...
    @overload
    def read(self, path: str, format: Literal["bytes"], user: str | None = None,
             request_timeout: float | None = None) -> bytes: ...
    @overload
    def read(self, path: str, format: Literal["stream"], user: str | None = None,
             request_timeout: float | None = None) -> FileStream: ...
    def read(self, path: str, format: Literal["text", "bytes", "stream"] = "text",
             user: str | None = None, request_timeout: float | None = None) -> Any:
        result = PORTAL.run(self._inner.read(path, format, user, request_timeout))
        return FileStream(result) if isinstance(result, AsyncFileStream) else result

    def write(self, path: str, data: SyncWriteData, user: str | None = None,
              request_timeout: float | None = None) -> WriteInfo:
        return PORTAL.run(self._inner.write(path, _async_data(data), user, request_timeout))

    def write_files(self, files: list[WriteEntry], user: str | None = None,
                    request_timeout: float | None = None) -> list[WriteInfo]:
        entries: list[WriteEntry] = [
            {"path": f["path"], "data": _async_data(f["data"])} for f in files  # type: ignore[arg-type]
        ]
        return PORTAL.run(self._inner.write_files(entries, user, request_timeout))

    def list(self, path: str, depth: int = 1, user: str | None = None,
             request_timeout: float | None = None) -> list[EntryInfo]:
        return PORTAL.run(self._inner.list(path, depth, user, request_timeout))

    def get_info(self, path: str, user: str | None = None,
                 request_timeout: float | None = None) -> EntryInfo:
        return PORTAL.run(self._inner.get_info(path, user, request_timeout))

    def exists(self, path: str, user: str | None = None,
               request_timeout: float | None = None) -> bool:
        return PORTAL.run(self._inner.exists(path, user, request_timeout))

    def make_dir(self, path: str, user: str | None = None,
                 request_timeout: float | None = None) -> bool:
        return PORTAL.run(self._inner.make_dir(path, user, request_timeout))

    def rename(self, old_path: str, new_path: str, user: str | None = None,
               request_timeout: float | None = None) -> EntryInfo:
        return PORTAL.run(self._inner.rename(old_path, new_path, user, request_timeout))

    def remove(self, path: str, user: str | None = None,
               request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.remove(path, user, request_timeout))

    def watch_dir(self, path: str, user: str | None = None, request_timeout: float | None = None,
                  timeout: float | None = DEFAULT_WATCH_TIMEOUT, recursive: bool = False,
                  include_entry: bool = False) -> WatchHandle:
        """Start watching ``path``; poll :meth:`WatchHandle.get_new_events` for changes."""
        handle = WatchHandle()
        handle._inner = PORTAL.run(self._inner.watch_dir(
            path, handle._collect, None, user, request_timeout, timeout, recursive, include_entry
        ))
        return handle
