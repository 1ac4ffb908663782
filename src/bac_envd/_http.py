"""Minimal ASGI plumbing for envd's plain HTTP routes (no framework: envd must start fast).

Errors use E2B envd's JSON shape ``{"code": <status>, "message": "..."}``; the SDK maps
the integer code back to an exception class. Where a Connect client asked (an RPC path),
Connect's shape ``{"code": "<name>", "message": "..."}``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from contextvars import ContextVar
from typing import Any
from urllib.parse import parse_qsl

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers = Iterable[tuple[bytes, bytes]]


def _never() -> bool:
    return False


# Whether the client of the request being served has gone (its connection closed): set by
# the connection for each request, read where a long request's end is reported.
client_gone: ContextVar[Callable[[], bool]] = ContextVar("client_gone", default=_never)


class BodyTooLarge(Exception):
    """The request body exceeds the limit of the route reading it."""


class ClientGone(Exception):
    """The client disconnected before the request body was complete."""


def header(scope: Scope, name: str) -> str | None:
    """The first value of a request header (``name`` lower-case), decoded as latin-1."""
    key = name.encode()
    for k, v in scope.get("headers", ()):
        if k == key:
            return bytes(v).decode("latin-1")
    return None


def header_items(scope: Scope) -> Iterable[tuple[str, str]]:
    for k, v in scope.get("headers", ()):
        yield bytes(k).decode("latin-1"), bytes(v).decode("latin-1")


def query(scope: Scope) -> dict[str, str]:
    """Query parameters, first value wins, blank values kept."""
    raw = bytes(scope.get("query_string", b"")).decode("latin-1")
    params: dict[str, str] = {}
    for key, value in parse_qsl(raw, keep_blank_values=True, encoding="utf-8", errors="strict"):
        params.setdefault(key, value)
    return params


async def body_chunks(receive: Receive) -> Any:
    """Yield request body chunks as they arrive (bounded by the server's flow control)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body", False):
            return


async def read_body(receive: Receive, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in body_chunks(receive):
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        parts.append(chunk)
    return b"".join(parts)


async def send_bytes(
    send: Send, status: int, body: bytes, content_type: str | None, headers: Headers = ()
) -> None:
    out = list(headers)
    if content_type is not None:
        out.append((b"content-type", content_type.encode()))
    out.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_empty(send: Send, status: int, headers: Headers = ()) -> None:
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_json(send: Send, status: int, payload: Any, headers: Headers = ()) -> None:
    body = json.dumps(payload, separators=(",", ":")).encode()
    await send_bytes(send, status, body, "application/json", headers)


async def send_error(send: Send, status: int, message: str) -> None:
    await send_json(send, status, {"code": status, "message": message})


async def send_connect_error(send: Send, status: int, code: str, message: str) -> None:
    await send_json(send, status, {"code": code, "message": message})
