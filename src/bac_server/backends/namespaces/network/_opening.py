"""What a relayed connection opens with: TLS (and the SNI it names), HTTP/1, or another
protocol.

Only the first bytes are read; nothing is decrypted. ``NeedMore`` tells the caller to
read further. An opening still undecided when the client stops sending (a TLS record or
a text line cut short) is ``UNDECIDED``: the relay refuses it, since the rest, sent once
the connection was let through, could name another host.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

MAX_OPENING = 16 * 1024 + 5  # one TLS record, or an HTTP request head
# A request line as lenient servers read it (case aside, spaces aside): anything that
# looks like one goes to the strict HTTP relay, which refuses what it cannot parse.
_REQUEST_LINE = re.compile(rb"^[\r\n]*[ \t]*[!-~]+[ \t]+[!-~]+[ \t]+HTTP/", re.IGNORECASE)
# Bytes no HTTP request line holds: an opening with one before its first line ends is
# another (binary) protocol.
_NOT_TEXT = re.compile(rb"[^\t\r\n -~]")


class NeedMore(Exception):
    """The opening is incomplete; read more bytes."""


class Kind(enum.Enum):
    TLS = "tls"
    HTTP = "http"
    OTHER = "other"  # another protocol, or a server that speaks first
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Opening:
    kind: Kind
    host: str | None = None  # the TLS SNI


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


def classify(data: bytes) -> Opening:
    """What ``data``, a connection's first bytes, opens; raises NeedMore if undecided."""
    if not data:
        raise NeedMore
    if data[0] == 0x16:  # TLS handshake record
        return Opening(Kind.TLS, _tls_server_name(data))
    start = len(data) - len(data.lstrip(b"\r\n"))
    line_end = data.find(b"\n", start)
    line = data if line_end < 0 else data[:line_end]
    if _NOT_TEXT.search(line):
        return Opening(Kind.OTHER)
    if line_end < 0:
        raise NeedMore  # perhaps an HTTP request line still arriving
    return Opening(Kind.HTTP if _REQUEST_LINE.match(line) else Kind.OTHER)


def undecided(data: bytes) -> Opening:
    """What an opening the client stopped sending (or sent too much of) counts as: a
    silent client waits for a server that speaks first; a cut-short one is refused."""
    return Opening(Kind.OTHER) if not data else Opening(Kind.UNDECIDED)
