"""Response pieces more than one resource answers with: the time format, ``Sandbox``
(the answer to create, connect and resume, a checkpoint's restore and each fork) and a
file streamed from an open handle (an artefact, a volume's file).

Every key the SDK's generated models require is always present (a missing one is a
``KeyError`` inside the SDK).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any, BinaryIO

from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from bac_server.control import LiveSandbox

_CHUNK = 1 << 20

CLIENT_ID = "bac"


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def rfc3339_unix(at: float) -> str:
    return rfc3339(datetime.fromtimestamp(at, UTC))


def sandbox(sbx: LiveSandbox, *, envd_version: str, domain: str) -> dict[str, Any]:
    """``Sandbox``: the answer to create and connect."""
    body: dict[str, Any] = {
        "templateID": sbx.template_id,
        "sandboxID": sbx.sandbox_id,
        "clientID": CLIENT_ID,
        "envdVersion": envd_version,
        "envdAccessToken": sbx.envd_access_token,
        "trafficAccessToken": sbx.traffic_access_token,
        "domain": domain,
    }
    if sbx.alias is not None:
        body["alias"] = sbx.alias
    return body


def streamed_file(handle: BinaryIO, *, media_type: str,
                  headers: Mapping[str, str] | None = None) -> StreamingResponse:
    """``handle``'s bytes to its end, read off the loop a MiB at a time, with no
    Content-Length (the caller adds one if it knows it). The handle is closed after the
    answer however it ends (a HEAD, a client gone before the first chunk: the chunks'
    own close never runs then); closing twice is harmless."""
    return StreamingResponse(_chunks(handle), headers=headers, media_type=media_type,
                             background=BackgroundTask(handle.close))


async def _chunks(handle: BinaryIO) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(handle.read, _CHUNK):
            yield chunk
    finally:
        handle.close()
