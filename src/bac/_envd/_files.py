"""The sandbox's filesystem (``sandbox.files``).

Relative paths are resolved by envd against the user's home directory; ``~`` works.
Contents move over HTTP (:mod:`bac._envd._transfer`); everything else is a Connect RPC.
"""

from __future__ import annotations

from typing import Any, Literal, NoReturn, overload

from bac import _errors as e
from bac._envd._command_handle import OutputHandler
from bac._envd._connection import EnvdConnection, timeout_ms
from bac._envd._errors import reraise
from bac._envd._transfer import AsyncFileStream, WriteData, WriteEntry, read, write_files
from bac._envd._watch import AsyncWatchHandle, entry_info
from bac._models import EntryInfo, FilesystemEvent, WriteInfo
from bac_protocol.envd import filesystem_pb

DEFAULT_WATCH_TIMEOUT = 60.0


class AsyncFilesystem:
    """Read, write, list, move and watch files in one sandbox."""

    def __init__(self, conn: EnvdConnection) -> None:
        self._conn = conn

    async def _fail(self, exc: BaseException) -> NoReturn:
        await reraise(exc, self._conn.is_healthy, not_found=e.PathNotFoundError)

    def _opts(self, user: str | None, request_timeout: float | None) -> dict[str, Any]:
        return {
            "headers": self._conn.rpc_headers(user),
            "timeout_ms": self._conn.request_timeout_ms(request_timeout),
        }

    @overload
    async def read(
        self,
        path: str,
        format: Literal["text"] = "text",
        user: str | None = None,
        request_timeout: float | None = None,
    ) -> str: ...
    @overload
    async def read(
        self,
        path: str,
        format: Literal["bytes"],
        user: str | None = None,
        request_timeout: float | None = None,
    ) -> bytes: ...
    @overload
    async def read(
        self,
        path: str,
        format: Literal["stream"],
        user: str | None = None,
        request_timeout: float | None = None,
    ) -> AsyncFileStream: ...
    async def read(
        self,
        path: str,
        format: Literal["text", "bytes", "stream"] = "text",
        user: str | None = None,
        request_timeout: float | None = None,
    ) -> str | bytes | AsyncFileStream:
        """The contents of ``path`` as text, bytes, or an async stream of byte chunks."""
        return await read(self._conn, path, format, user, request_timeout)

    async def write(
        self,
        path: str,
        data: WriteData,
        user: str | None = None,
        request_timeout: float | None = None,
    ) -> WriteInfo:
        """Create or replace ``path`` (parents are created) with ``data``.

        ``data`` may be text, bytes, a file object, or an async iterable of bytes.
        """
        infos = await write_files(
            self._conn, [{"path": path, "data": data}], user, request_timeout
        )
        return infos[0]

    async def write_files(
        self,
        files: list[WriteEntry],
        user: str | None = None,
        request_timeout: float | None = None,
    ) -> list[WriteInfo]:
        """Write several files; small ones share one request."""
        return await write_files(self._conn, files, user, request_timeout)

    async def list(
        self,
        path: str,
        depth: int = 1,
        user: str | None = None,
        request_timeout: float | None = None,
    ) -> list[EntryInfo]:
        """Entries under directory ``path``, ``depth`` levels deep."""
        if depth < 1:
            raise e.InvalidArgumentError(f"depth must be at least 1, got {depth}")
        try:
            res = await self._conn.filesystem.list_dir(
                filesystem_pb.ListDirRequest(path=path, depth=depth),
                **self._opts(user, request_timeout),
            )
        except Exception as exc:
            await self._fail(exc)
        return [entry_info(entry) for entry in res.entries]

    async def get_info(
        self, path: str, user: str | None = None, request_timeout: float | None = None
    ) -> EntryInfo:
        """Type, size, mode, owner and times of ``path``."""
        try:
            res = await self._conn.filesystem.stat(
                filesystem_pb.StatRequest(path=path), **self._opts(user, request_timeout)
            )
        except Exception as exc:
            await self._fail(exc)
        if res.entry is None:
            raise e.ServerError(f"stat {path}: envd sent no entry")
        return entry_info(res.entry)

    async def exists(
        self, path: str, user: str | None = None, request_timeout: float | None = None
    ) -> bool:
        """Whether ``path`` exists."""
        try:
            await self.get_info(path, user, request_timeout)
        except e.PathNotFoundError:
            return False
        return True

    async def make_dir(
        self, path: str, user: str | None = None, request_timeout: float | None = None
    ) -> bool:
        """Create directory ``path`` and its parents; False if it already existed."""
        try:
            await self._conn.filesystem.make_dir(
                filesystem_pb.MakeDirRequest(path=path), **self._opts(user, request_timeout)
            )
        except Exception as exc:
            try:
                await self._fail(exc)
            except e.AlreadyExistsError:
                return False
        return True

    async def rename(
        self,
        old_path: str,
        new_path: str,
        user: str | None = None,
        request_timeout: float | None = None,
    ) -> EntryInfo:
        """Move ``old_path`` to ``new_path``; returns the moved entry."""
        try:
            res = await self._conn.filesystem.move(
                filesystem_pb.MoveRequest(source=old_path, destination=new_path),
                **self._opts(user, request_timeout),
            )
        except Exception as exc:
            await self._fail(exc)
        if res.entry is None:
            raise e.ServerError(f"rename {old_path}: envd sent no entry")
        return entry_info(res.entry)

    async def remove(
        self, path: str, user: str | None = None, request_timeout: float | None = None
    ) -> None:
        """Delete ``path``, recursively; a missing path is not an error."""
        try:
            await self._conn.filesystem.remove(
                filesystem_pb.RemoveRequest(path=path), **self._opts(user, request_timeout)
            )
        except Exception as exc:
            await self._fail(exc)

    async def watch_dir(
        self,
        path: str,
        on_event: OutputHandler[FilesystemEvent],
        on_exit: OutputHandler[BaseException | None] | None = None,
        user: str | None = None,
        request_timeout: float | None = None,
        timeout: float | None = DEFAULT_WATCH_TIMEOUT,  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        recursive: bool = False,
        include_entry: bool = False,
    ) -> AsyncWatchHandle:
        """Deliver changes under directory ``path`` to ``on_event`` until stopped.

        ``timeout`` bounds the watch in seconds (0: until stopped). Event names are
        relative to ``path``.
        """
        events = self._conn.filesystem.watch_dir(
            filesystem_pb.WatchDirRequest(
                path=path, recursive=recursive, include_entry=include_entry
            ),
            headers=self._conn.rpc_headers(user, stream=True),
            timeout_ms=timeout_ms(timeout),
        )
        try:
            return await AsyncWatchHandle.open(
                events, on_event, on_exit, self._conn.is_healthy,
                self._conn.config.timeout(request_timeout),
            )
        except Exception as exc:
            await self._fail(exc)
