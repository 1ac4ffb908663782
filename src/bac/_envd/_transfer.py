"""Moving file contents in and out of the sandbox over envd's ``/files`` endpoint.

Small payloads (``str``/``bytes``) go as one multipart request, several files at once;
streams (file objects, async iterables of bytes) go one file per request as a raw
``application/octet-stream`` body, so their size never has to fit in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from typing import IO, Any, Literal, TypedDict, cast, overload

import httpx

from bac import _errors as e
from bac._envd._connection import EnvdConnection
from bac._envd._errors import http_error
from bac._models import FileType, WriteInfo

CHUNK = 1 << 20
WriteData = str | bytes | IO[bytes] | IO[str] | AsyncIterable[bytes]
ReadFormat = Literal["text", "bytes", "stream"]


class WriteEntry(TypedDict):
    """One file of :meth:`AsyncFilesystem.write_files`."""

    path: str
    data: WriteData


class AsyncFileStream:
    """The bytes of a file as they arrive; close it (or use ``async with``) when done."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._chunks = response.aiter_bytes()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await anext(self._chunks)
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        await self._response.aclose()

    async def __aenter__(self) -> AsyncFileStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _params(path: str | None, user: str | None) -> dict[str, str]:
    params = {"path": path} if path else {}
    if user:
        params["username"] = user
    return params


async def _send(
    conn: EnvdConnection, request: httpx.Request, what: str, stream: bool = False
) -> httpx.Response:
    try:
        response = await conn.http.send(request, stream=stream)
    except httpx.TimeoutException as exc:
        raise e.TimeoutError(f"{what}: timed out (request_timeout)") from exc
    except httpx.TransportError as exc:
        running = await conn.is_healthy()
        if not running:
            raise e.SandboxNotRunningError(f"{what}: the sandbox is gone") from exc
        raise e.SandboxUnreachableError(f"{what}: connection lost: {exc}") from exc
    if response.is_success:
        return response
    body = await response.aread()
    await response.aclose()
    raise http_error(response.status_code, response.headers.get("content-type", ""), body, what)


@overload
async def read(
    conn: EnvdConnection,
    path: str,
    fmt: Literal["text"],
    user: str | None,
    request_timeout: float | None,
) -> str: ...
@overload
async def read(
    conn: EnvdConnection,
    path: str,
    fmt: Literal["bytes"],
    user: str | None,
    request_timeout: float | None,
) -> bytes: ...
@overload
async def read(
    conn: EnvdConnection,
    path: str,
    fmt: Literal["stream"],
    user: str | None,
    request_timeout: float | None,
) -> AsyncFileStream: ...
async def read(
    conn: EnvdConnection,
    path: str,
    fmt: ReadFormat,
    user: str | None,
    request_timeout: float | None,
) -> str | bytes | AsyncFileStream:
    """Download ``path``; ``stream`` hands back the open response."""
    if fmt not in ("text", "bytes", "stream"):
        raise e.InvalidArgumentError(f"format must be text, bytes or stream, got {fmt!r}")
    request = conn.http.build_request(
        "GET", "/files", params=_params(path, user), timeout=conn.config.timeout(request_timeout)
    )
    response = await _send(conn, request, f"read {path}", stream=fmt == "stream")
    if fmt == "stream":
        return AsyncFileStream(response)
    return response.text if fmt == "text" else response.content


async def _chunks(data: IO[Any] | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(data, AsyncIterable):
        async for chunk in data:
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise e.InvalidArgumentError(f"upload streams must yield bytes, got {chunk!r:.40}")
            yield bytes(chunk)
        return
    while chunk := await asyncio.to_thread(data.read, CHUNK):
        yield chunk.encode() if isinstance(chunk, str) else bytes(chunk)


def _write_infos(response: httpx.Response, expected: int, what: str) -> list[WriteInfo]:
    try:
        body = response.json()
        infos = [
            WriteInfo(
                name=item["name"],
                type=FileType.DIR if item.get("type") == "dir" else FileType.FILE,
                path=item["path"],
                metadata=item.get("metadata") or None,
            )
            for item in body
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise e.ServerError(f"{what}: envd sent an unexpected upload answer") from exc
    if len(infos) != expected:
        raise e.ServerError(f"{what}: envd confirmed {len(infos)} of {expected} files")
    return infos


async def write_files(
    conn: EnvdConnection,
    files: Sequence[WriteEntry],
    user: str | None,
    request_timeout: float | None,
) -> list[WriteInfo]:
    """Upload every entry; results come back in the order given."""
    if not files:
        return []
    small = [i for i, f in enumerate(files) if isinstance(f["data"], str | bytes)]
    results: dict[int, WriteInfo] = {}
    if small:
        parts: list[tuple[str, tuple[str, str | bytes, str]]] = []
        for i in small:
            data = cast(str | bytes, files[i]["data"])
            kind = "text/plain" if isinstance(data, str) else "application/octet-stream"
            parts.append(("file", (files[i]["path"], data, kind)))
        path = files[small[0]]["path"] if len(small) == 1 else None
        what = f"write {path or f'{len(small)} files'}"
        request = conn.http.build_request(
            "POST", "/files", params=_params(path, user), files=parts,
            timeout=conn.config.timeout(request_timeout),
        )
        infos = _write_infos(await _send(conn, request, what), len(small), what)
        results.update(zip(small, infos, strict=True))
    for i, f in enumerate(files):
        if i in results:
            continue
        what = f"write {f['path']}"
        request = conn.http.build_request(
            "POST",
            "/files",
            params=_params(f["path"], user),
            content=_chunks(f["data"]),  # type: ignore[arg-type]
            headers={"Content-Type": "application/octet-stream"},
            timeout=conn.config.timeout(request_timeout),
        )
        results[i] = _write_infos(await _send(conn, request, what), 1, what)[0]
    return [results[i] for i in range(len(files))]
