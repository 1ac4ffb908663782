"""A live NDJSON answer of the REST API (a trace or a build log followed): one client of
its own without a read deadline (a quiet sandbox or a long compile sends nothing for
minutes), one JSON object per non-empty line, and a broken connection as
``ServerUnreachableError`` naming the stream."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from bac import _errors as e
from bac._config import ConnectionConfig, http_client
from bac._version import USER_AGENT


@contextlib.asynccontextmanager
async def opened(config: ConnectionConfig, path: str, params: Mapping[str, str],
                 what: str) -> AsyncIterator[httpx.Response]:
    """The streamed answer to ``GET path``; its status is the caller's to check."""
    headers = {"X-API-KEY": config.require_api_key(), "User-Agent": USER_AGENT,
               **config.headers}
    timeout = httpx.Timeout(config.request_timeout, read=None)
    async with http_client(base_url=config.api_url, headers=headers,
                                 timeout=timeout) as client:
        try:
            async with client.stream("GET", path, params=params) as response:
                yield response
        except httpx.TransportError as exc:
            raise e.ServerUnreachableError(f"the {what} stream broke: {exc}") from exc


async def objects(response: httpx.Response, what: str) -> AsyncIterator[dict[str, Any]]:
    """Each line of ``response`` as a JSON object (blank lines skipped)."""
    async for line in response.aiter_lines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise e.ServerError(f"the {what} stream sent a non-JSON line: {line[:80]!r}"
                                ) from exc
        if not isinstance(value, dict):
            raise e.ServerError(f"the {what} stream sent a line that is not an object")
        yield value
