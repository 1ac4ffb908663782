"""HTTP/1.1 framing for the relay: request heads, chunks, and the response parser callbacks."""

from __future__ import annotations

import httptools
from starlette.types import Scope

from bac_server.gateway.headers import HOP_BY_HOP, for_sandbox


class ParsedResponse:
    """httptools callbacks, collected for the relay loop."""

    __slots__ = ("body", "complete", "framed", "headers", "headers_done", "keep_alive", "parser")

    def __init__(self) -> None:
        self.parser: httptools.HttpResponseParser | None = None
        self.keep_alive = False
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.headers_done = False
        self.complete = False
        self.framed = False  # length known from content-length or chunked encoding

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered in (b"content-length", b"transfer-encoding"):
            self.framed = True
        if lowered not in HOP_BY_HOP:
            self.headers.append((lowered, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(bytes(body))

    def on_message_complete(self) -> None:
        # Only valid inside this callback: the parser resets once the message is done.
        assert self.parser is not None
        self.keep_alive = bool(self.parser.should_keep_alive())
        self.complete = True


def request_head(scope: Scope, chunked: bool) -> bytes:
    target: bytes = scope.get("raw_path") or scope["path"].encode()
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    parts = [scope["method"].encode(), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in for_sandbox(scope["headers"]):
        if chunked and name == b"content-length":
            continue
        parts += [name, b": ", value, b"\r\n"]
    if chunked:
        parts.append(b"transfer-encoding: chunked\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)
