"""The host name a client names in its first bytes: TLS SNI or the HTTP Host header.

Only what a connection's opening says is read (the TLS ClientHello's server_name
extension, or an HTTP/1 request's Host header); nothing is decrypted. ``need_more``
tells the caller to read further; ``None`` means the opening names no host.
"""

from __future__ import annotations

import re

MAX_OPENING = 16 * 1024 + 5  # one TLS record, or an HTTP request head
_HTTP_METHOD = re.compile(rb"^[A-Z]{3,10} \S+ HTTP/1\.[01]\r\n")
_HOST_LINE = re.compile(rb"\r\nhost:[ \t]*([^\r\n]*)", re.IGNORECASE)


class NeedMore(Exception):
    """The opening is incomplete; read more bytes."""


def _tls_server_name(data: bytes) -> str | None:
    if len(data) < 5:
        raise NeedMore
    record_length = int.from_bytes(data[3:5], "big")
    if len(data) < 5 + record_length:
        raise NeedMore
    body = data[5:5 + record_length]
    if len(body) < 4 or body[0] != 0x01:  # not a ClientHello
        return None
    pos = 4 + 2 + 32  # handshake header, client version, random
    try:
        pos += 1 + body[pos]  # session id
        pos += 2 + int.from_bytes(body[pos:pos + 2], "big")  # cipher suites
        pos += 1 + body[pos]  # compression methods
        end = pos + 2 + int.from_bytes(body[pos:pos + 2], "big")
        pos += 2
        while pos + 4 <= min(end, len(body)):
            kind = int.from_bytes(body[pos:pos + 2], "big")
            size = int.from_bytes(body[pos + 2:pos + 4], "big")
            data_start = pos + 4
            if kind == 0:  # server_name: list length, type 0 (host_name), length, name
                if body[data_start + 2] != 0:
                    return None
                length = int.from_bytes(body[data_start + 3:data_start + 5], "big")
                name = body[data_start + 5:data_start + 5 + length]
                return name.decode("ascii").lower().rstrip(".") or None
            pos = data_start + size
    except (IndexError, UnicodeDecodeError):
        return None
    return None


def _http_host(data: bytes) -> str | None:
    head_end = data.find(b"\r\n\r\n")
    if head_end < 0:
        if len(data) >= MAX_OPENING:
            return None
        raise NeedMore
    match = _HOST_LINE.search(data[:head_end + 2])
    if match is None:
        return None
    host = match.group(1).strip().decode("latin-1").lower()
    if host.startswith("["):
        return None
    return host.rsplit(":", 1)[0].rstrip(".") or None


def opening_host(data: bytes) -> str | None:
    """The host named by a connection's first bytes; raises NeedMore if undecided."""
    if not data:
        raise NeedMore
    if data[0] == 0x16:  # TLS handshake record
        return _tls_server_name(data)
    if b"\r\n" not in data:
        if len(data) < 8192 and re.match(rb"^[A-Z]{1,10}( |$)", data):
            raise NeedMore  # perhaps an HTTP request line still arriving
        return None
    if _HTTP_METHOD.match(data):
        return _http_host(data)
    return None
