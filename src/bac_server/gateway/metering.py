"""What the gateway counts of each request it relays (``control.telemetry``): its status
class, body bytes each way, and the Connect error an envd RPC ended with.

The counting wraps the ASGI ``receive`` and ``send`` of one request: a few additions per
message, no copy of a body. A Connect error is read where the protocol puts it: in a
unary RPC's status and JSON body (``{"code": ...}``), in a streaming RPC's end-of-stream
message (flag 0x02, ``{"error": {"code": ...}}``); the stream's other messages are only
skipped over by their length prefixes.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from bac_server.control.telemetry import Telemetry

_END_STREAM = 0x02
_MAX_ERROR_BODY = 16 * 1024


class ConnectScanner:
    """Walks a Connect stream's envelopes (1 flag byte, 4 length bytes, payload) as the
    body passes, keeping only the end-of-stream message."""

    def __init__(self) -> None:
        self._head = b""
        self._skip = 0
        self._end: bytearray | None = None
        self._end_left = 0

    def feed(self, data: bytes) -> None:
        view, at = memoryview(data), 0
        while at < len(view):
            if self._end is not None and self._end_left:
                take = min(self._end_left, len(view) - at)
                self._end += view[at:at + take]
                self._end_left -= take
                at += take
                continue
            if self._skip:
                take = min(self._skip, len(view) - at)
                self._skip -= take
                at += take
                continue
            need = 5 - len(self._head)
            self._head += bytes(view[at:at + need])
            at += min(need, len(view) - at)
            if len(self._head) < 5:
                return
            flags, length = self._head[0], int.from_bytes(self._head[1:5], "big")
            self._head = b""
            if flags & _END_STREAM and length <= _MAX_ERROR_BODY:
                self._end, self._end_left = bytearray(), length
            else:
                self._skip = length

    def code(self) -> str | None:
        if self._end is None or self._end_left:
            return None
        try:
            error = json.loads(bytes(self._end)).get("error")
        except (ValueError, AttributeError):
            return None
        return str(error.get("code", "unknown")) if isinstance(error, dict) else None


class Metered:
    """The counting wrappers of one request's ``receive`` and ``send``."""

    def __init__(self, telemetry: Telemetry, scope: Scope, *, envd: bool) -> None:
        self._telemetry = telemetry
        self._websocket = scope["type"] == "websocket"
        self._envd = envd
        self._status: int | None = None
        self._scanner: ConnectScanner | None = None
        self._unary_error: bytearray | None = None
        self.bytes_in = 0
        self.bytes_out = 0

    def receive(self, inner: Receive) -> Receive:
        async def receive() -> Message:
            message = await inner()
            body = message.get("body") or message.get("bytes") or message.get("text")
            if body:
                self.bytes_in += len(body)
            return message
        return receive

    def send(self, inner: Send) -> Send:
        async def send(message: Message) -> None:
            kind = message["type"]
            if kind in ("http.response.start", "websocket.http.response.start"):
                self._started(message)
            elif kind == "websocket.accept":
                self._status = 101
            body = message.get("body") or message.get("bytes") or message.get("text")
            if body:
                self.bytes_out += len(body)
                self._body(body if isinstance(body, bytes) else b"")
            await inner(message)
        return send

    def _started(self, message: Message) -> None:
        self._status = int(message["status"])
        if not self._envd or self._websocket:
            return
        content_type = next((v for n, v in message.get("headers", ()) if n == b"content-type"),
                            b"")
        if content_type.startswith(b"application/connect+"):
            self._scanner = ConnectScanner()
        elif self._status >= 400 and content_type.startswith(b"application/json"):
            self._unary_error = bytearray()

    def _body(self, body: bytes) -> None:
        if self._scanner is not None:
            self._scanner.feed(body)
        elif self._unary_error is not None and len(self._unary_error) < _MAX_ERROR_BODY:
            self._unary_error += body[:_MAX_ERROR_BODY - len(self._unary_error)]

    def finish(self, error: str | None = None) -> None:
        """Count the request (``error``: why the gateway could not relay it)."""
        t = self._telemetry
        status = self._status
        label = "none" if status is None else f"{status // 100}xx"
        t.gateway_requests.labels("websocket" if self._websocket else "http", label).inc()
        if self.bytes_in:
            t.gateway_bytes.labels("in").inc(self.bytes_in)
        if self.bytes_out:
            t.gateway_bytes.labels("out").inc(self.bytes_out)
        if error is not None:
            t.gateway_errors.labels(error).inc()
        code = self._code()
        if code is not None:
            t.envd_error(code)

    def _code(self) -> str | None:
        if self._scanner is not None:
            return self._scanner.code()
        if self._unary_error is not None:
            try:
                found: Any = json.loads(bytes(self._unary_error))
            except ValueError:
                return "unknown"
            return str(found.get("code", "unknown")) if isinstance(found, dict) else "unknown"
        return None
