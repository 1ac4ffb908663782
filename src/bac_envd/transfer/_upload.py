"""``POST /files``: multipart/form-data (one part per file) or a raw octet-stream body.

Multipart parts named ``file`` are written to the query ``path`` when given, else to the
part's filename (which may hold directories). Two parts aimed at one path are refused.
``X-Metadata-<key>`` headers become the files' metadata; ``Content-Encoding: gzip`` bodies
are gunzipped on the fly with a bounded output window.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import AsyncIterator
from typing import Any

from bac_envd import _xattrs
from bac_envd._errors import InvalidPath
from bac_envd._http import (
    ClientGone,
    Receive,
    Scope,
    Send,
    body_chunks,
    header,
    header_items,
    send_error,
    send_json,
)
from bac_envd._paths import PathResolver
from bac_envd._users import User
from bac_envd.transfer._encoding import GZIP, EncodingError, request_encoding
from bac_envd.transfer._multipart import MultipartUpload
from bac_envd.transfer._writer import UploadError, UploadTarget

_WINDOW = 1 << 20


async def _gunzip(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    inflater = zlib.decompressobj(31)
    async for chunk in chunks:
        data = inflater.decompress(chunk, _WINDOW)
        while data:
            yield data
            data = inflater.decompress(inflater.unconsumed_tail, _WINDOW)
    tail = inflater.flush()
    if tail:
        yield tail
    if not inflater.eof:
        raise UploadError(400, "error decompressing request body: unexpected EOF")


def _metadata(scope: Scope) -> dict[str, str]:
    found = {
        name[len("x-metadata-") :]: value
        for name, value in header_items(scope)
        if name.startswith("x-metadata-")
    }
    try:
        return _xattrs.validate(found)
    except _xattrs.BadMetadata as exc:
        raise UploadError(400, f"invalid metadata: {exc}") from exc


def entry(path: str, metadata: dict[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {"path": path, "name": os.path.basename(path), "type": "file"}
    if metadata:
        result["metadata"] = metadata
    return result


async def _raw(body: AsyncIterator[bytes], user: User, path: str, meta: dict[str, str]
               ) -> list[tuple[str, int]]:
    target = UploadTarget(path, user, meta)
    try:
        async for chunk in body:
            target.write(chunk)
    except BaseException:
        target.close()
        raise
    target.finish()
    return [(path, target.size)]


async def upload(
    scope: Scope,
    receive: Receive,
    send: Send,
    user: User,
    resolve: PathResolver,
    query_path: str | None,
) -> list[tuple[str, int]]:
    """Write the files; what was written: [(path, bytes)], [] when the upload failed."""
    content_type = header(scope, "content-type") or ""
    media = content_type.split(";", 1)[0].strip().lower()
    try:
        decoding = request_encoding(header(scope, "content-encoding"))
        metadata = _metadata(scope)
        body = body_chunks(receive)
        if decoding == GZIP:
            body = _gunzip(body)
        if media == "application/octet-stream":
            if query_path is None:
                raise UploadError(400, "path query parameter is required for raw body upload")
            try:
                path = resolve(query_path)
            except InvalidPath as exc:
                raise UploadError(400, f"error resolving path: {exc}") from exc
            written = await _raw(body, user, path, metadata)
        elif media.startswith("multipart/"):
            parser = MultipartUpload(content_type, user, resolve, query_path, metadata)
            written = await parser.run_sized(body)
        else:
            raise UploadError(
                400,
                f"unsupported content type: {content_type}, "
                "expected multipart/form-data or application/octet-stream",
            )
    except EncodingError as exc:
        await send_error(send, 400, f"error decompressing request body: {exc}")
        return []
    except zlib.error as exc:
        await send_error(send, 400, f"error decompressing request body: {exc}")
        return []
    except UploadError as exc:
        await send_error(send, exc.status, str(exc))
        return []
    except ClientGone:
        return []
    await send_json(send, 200, [entry(p, metadata) for p, _ in written])
    return written
