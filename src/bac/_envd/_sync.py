"""Blocking twins of envd's modules: commands, PTYs, and the filesystem (reads, writes,
listings and polled watches).

Each method runs the async implementation on the portal loop; see :mod:`bac._portal`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import IO, Any, Literal, overload

from bac._envd._command_handle import AsyncCommandHandle, OutputHandler
from bac._envd._commands import DEFAULT_COMMAND_TIMEOUT, AsyncCommands
from bac._envd._files import DEFAULT_WATCH_TIMEOUT, AsyncFilesystem
from bac._envd._pty import DEFAULT_PTY_TIMEOUT, AsyncPty
from bac._envd._transfer import AsyncFileStream, WriteData, WriteEntry
from bac._envd._watch import AsyncWatchHandle
from bac._models import CommandResult, EntryInfo, FilesystemEvent, ProcessInfo, PtySize, WriteInfo
from bac._portal import PORTAL

SyncWriteData = str | bytes | IO[bytes] | IO[str] | Iterable[bytes]


class CommandHandle:
    """A command running in the background; blocking twin of :class:`AsyncCommandHandle`."""

    def __init__(self, inner: AsyncCommandHandle) -> None:
        self._inner = inner

    pid = property(lambda self: self._inner.pid, doc="Process id inside the sandbox.")
    stdout = property(lambda self: self._inner.stdout, doc="Stdout so far.")
    stderr = property(lambda self: self._inner.stderr, doc="Stderr so far.")
    exit_code = property(lambda self: self._inner.exit_code, doc="Exit code, once ended.")
    error = property(lambda self: self._inner.error, doc="Envd's failure description.")

    def wait(self) -> CommandResult:
        return PORTAL.run(self._inner.wait())

    def kill(self) -> bool:
        return PORTAL.run(self._inner.kill())

    def send_stdin(self, data: str | bytes, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.send_stdin(data, request_timeout))

    def close_stdin(self, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.close_stdin(request_timeout))

    def disconnect(self) -> None:
        PORTAL.run(self._inner.disconnect())


class Commands:
    """Blocking twin of :class:`AsyncCommands`; callbacks run on the SDK's loop thread."""

    def __init__(self, inner: AsyncCommands) -> None:
        self._inner = inner

    @overload
    def run(
        self, cmd: str, background: Literal[False] = False, envs: dict[str, str] | None = None,
        user: str | None = None, cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None, on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False, timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
        request_timeout: float | None = None,
    ) -> CommandResult: ...
    @overload
    def run(
        self, cmd: str, background: Literal[True], envs: dict[str, str] | None = None,
        user: str | None = None, cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None, on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False, timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
        request_timeout: float | None = None,
    ) -> CommandHandle: ...
    def run(
        self, cmd: str, background: bool = False, envs: dict[str, str] | None = None,
        user: str | None = None, cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None, on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False, timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
        request_timeout: float | None = None,
    ) -> CommandResult | CommandHandle:
        """Run ``cmd``; see :meth:`AsyncCommands.run`."""
        handle = PORTAL.run(
            self._inner.run(
                cmd, True, envs, user, cwd, on_stdout, on_stderr, stdin, timeout, request_timeout
            )
        )
        wrapped = CommandHandle(handle)
        return wrapped if background else wrapped.wait()

    def connect(
        self, pid: int, timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
        request_timeout: float | None = None, on_stdout: OutputHandler[str] | None = None,
        on_stderr: OutputHandler[str] | None = None,
    ) -> CommandHandle:
        return CommandHandle(
            PORTAL.run(self._inner.connect(pid, timeout, request_timeout, on_stdout, on_stderr))
        )

    def list(self, request_timeout: float | None = None) -> list[ProcessInfo]:
        return PORTAL.run(self._inner.list(request_timeout))

    def kill(self, pid: int, request_timeout: float | None = None) -> bool:
        return PORTAL.run(self._inner.kill(pid, request_timeout))

    def send_stdin(self, pid: int, data: str | bytes, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.send_stdin(pid, data, request_timeout))

    def close_stdin(self, pid: int, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.close_stdin(pid, request_timeout))


class Pty:
    """Blocking twin of :class:`AsyncPty`; ``on_data`` runs on the SDK's loop thread."""

    def __init__(self, inner: AsyncPty) -> None:
        self._inner = inner

    def create(
        self, size: PtySize, on_data: OutputHandler[bytes], user: str | None = None,
        cwd: str | None = None, envs: dict[str, str] | None = None,
        timeout: float | None = DEFAULT_PTY_TIMEOUT, request_timeout: float | None = None,
        *, cmd: str | None = None,
    ) -> CommandHandle:
        return CommandHandle(
            PORTAL.run(self._inner.create(size, on_data, user, cwd, envs, timeout, request_timeout,
                                          cmd=cmd))
        )

    def connect(
        self, pid: int, on_data: OutputHandler[bytes],
        timeout: float | None = DEFAULT_PTY_TIMEOUT, request_timeout: float | None = None,
    ) -> CommandHandle:
        return CommandHandle(
            PORTAL.run(self._inner.connect(pid, on_data, timeout, request_timeout))
        )

    def send_input(self, pid: int, data: bytes | str, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.send_input(pid, data, request_timeout))

    send_stdin = send_input

    def resize(self, pid: int, size: PtySize, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.resize(pid, size, request_timeout))

    def kill(self, pid: int, request_timeout: float | None = None) -> bool:
        return PORTAL.run(self._inner.kill(pid, request_timeout))


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
