"""``GET /files``: stream one file, gzipped when the client accepts it.

Range and conditional requests are answered in identity encoding (single byte range →
206, ``If-Modified-Since`` → 304), like Go's ``http.ServeContent`` which E2B envd uses.
"""

from __future__ import annotations

import asyncio
import os
import stat
import zlib
from email.utils import formatdate, parsedate_to_datetime
from typing import BinaryIO
from urllib.parse import quote

from bac_envd._errors import InvalidPath
from bac_envd._http import Scope, Send, header, send_empty, send_error
from bac_envd._paths import PathResolver
from bac_envd.transfer._encoding import GZIP, EncodingError, response_encoding
from bac_envd.transfer._faults import os_status

CHUNK = 1 << 20


def _content_type(path: str) -> str:
    import mimetypes

    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def _disposition(name: str) -> bytes:
    if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name:
        return f'inline; filename="{name}"'.encode()
    return f"inline; filename*=UTF-8''{quote(name)}".encode()


def _byte_range(spec: str | None, size: int) -> tuple[int, int] | bool | None:
    """(start, end) inclusive for one satisfiable range, None to ignore, False if unsatisfiable."""
    if not spec or not spec.startswith("bytes=") or "," in spec:
        return None
    first, _, last = spec[6:].strip().partition("-")
    try:
        if not first:
            length = int(last)
            return (max(0, size - length), size - 1) if length > 0 and size else False
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return False
    return start, min(end, size - 1)


def _not_modified(scope: Scope, mtime: float) -> bool:
    since = header(scope, "if-modified-since")
    if not since or header(scope, "if-none-match"):
        return False
    try:
        return int(mtime) <= parsedate_to_datetime(since).timestamp()
    except (TypeError, ValueError):
        return False


async def _stream_identity(send: Send, f: BinaryIO, length: int) -> int:
    left = length
    while left > 0:
        data = await asyncio.to_thread(f.read, min(CHUNK, left))
        if not data:
            break  # the file shrank meanwhile; the client sees a short body
        left -= len(data)
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    return length - left


async def _stream_gzip(send: Send, f: BinaryIO) -> int:
    # Level 1: several times faster than the default for little size cost; downloads are
    # gzipped whenever httpx's default Accept-Encoding allows it.
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)

    read = 0

    def next_piece() -> tuple[bytes, bool]:
        nonlocal read
        data = f.read(CHUNK)
        if data:
            read += len(data)
            return compressor.compress(data), False
        return compressor.flush(), True

    while True:
        piece, done = await asyncio.to_thread(next_piece)
        if piece:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        if done:
            break
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    return read


async def download(scope: Scope, send: Send, resolve: PathResolver,
                   raw_path: str) -> list[tuple[str, int]]:
    """Send the file; what was sent of it: [(path, file bytes)], [] when nothing."""
    try:
        path = resolve(raw_path)
    except InvalidPath as exc:
        await send_error(send, 400, f"error expanding and resolving path '{raw_path}': {exc}")
        return []
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        await send_error(send, 404, f"path '{path}' does not exist")
        return []
    except OSError as exc:
        await send_error(send, os_status(exc), f"error checking if path exists '{path}': {exc}")
        return []
    if stat.S_ISDIR(st.st_mode):
        await send_error(send, 400, f"path '{path}' is a directory")
        return []
    try:
        encoding = response_encoding(header(scope, "accept-encoding"))
    except EncodingError as exc:
        await send_error(send, 406, str(exc))
        return []
    range_spec = header(scope, "range")
    conditional = ("if-modified-since", "if-none-match", "if-range")
    if range_spec or any(header(scope, name) for name in conditional):
        encoding = ""
    try:
        f: BinaryIO = await asyncio.to_thread(open, path, "rb")
    except OSError as exc:
        await send_error(send, os_status(exc), f"error opening file '{path}': {exc}")
        return []
    try:
        headers = [
            (b"content-type", _content_type(raw_path).encode()),
            (b"content-disposition", _disposition(os.path.basename(path))),
            (b"vary", b"Accept-Encoding"),
            (b"last-modified", formatdate(st.st_mtime, usegmt=True).encode()),
        ]
        if encoding == GZIP:
            headers.append((b"content-encoding", b"gzip"))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            return [(path, await _stream_gzip(send, f))]
        if _not_modified(scope, st.st_mtime):
            await send_empty(send, 304, headers)
            return [(path, 0)]
        status, start, length = 200, 0, st.st_size
        chosen = _byte_range(range_spec, st.st_size)
        if chosen is False:
            await send_empty(send, 416, [(b"content-range", f"bytes */{st.st_size}".encode())])
            return []
        if isinstance(chosen, tuple):
            start, end = chosen
            status, length = 206, end - start + 1
            headers.append((b"content-range", f"bytes {start}-{end}/{st.st_size}".encode()))
            f.seek(start)
        headers += [(b"accept-ranges", b"bytes"), (b"content-length", str(length).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        return [(path, await _stream_identity(send, f, length))]
    finally:
        f.close()
