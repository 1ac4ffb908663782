"""What envd did, told to the host: one JSON datagram per finished process or transfer.

The host binds a unix datagram socket per sandbox in a directory bound read-only into
the sandbox at ``/run/bac`` (``trace.sock``, writable only by the sandbox's root, the
user envd runs as). Each report goes out on a fresh socket that is closed at once, with
``MSG_DONTWAIT``: envd keeps no connection (nothing for a checkpoint to save or for a
restore in another slot to get wrong: the path resolves to that slot's socket), never
waits on the host, and a report the host cannot take (no socket yet, its queue full) is
only counted; the count rides along in the next report that goes out (``unsent``).

The host attributes a report by the socket it arrived on, never by its contents; this
side only describes. Costs one ``socket``/``sendto``/``close`` per report, with the
``json`` and ``socket`` modules the server already loaded.
"""

from __future__ import annotations

import json
import os
import socket

# Where reports go; the host's OCI config may point it elsewhere, and an empty value
# turns them off (envd run outside a sandbox, a benchmark's floor).
SOCKET_PATH = os.environ.get("BAC_ENVD_TRACE_SOCKET", "/run/bac/trace.sock")
# The host refuses larger datagrams; a command line is cut well below that.
MAX_TEXT = 1024
# The last bytes of a process's stdout and of its stderr that a report carries.
TAIL = 512

_unsent = 0


def clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit]


def tail_text(data: bytes) -> str:
    """The end of an output as text: UTF-8, a character cut at the start dropped."""
    text = data.decode("utf-8", "replace")
    return text[1:] if text.startswith("\ufffd") and len(data) >= TAIL else text


def report(kind: str, fields: dict[str, object], path: str = SOCKET_PATH) -> bool:
    """Send one report; False (and counted) when the host could not take it."""
    global _unsent
    if not path:
        return False
    message = {"kind": kind, **fields}
    if _unsent:
        message["unsent"] = _unsent
    data = json.dumps(message, separators=(",", ":"), default=str).encode()
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    except OSError:
        _unsent += 1
        return False
    try:
        sock.sendto(data, socket.MSG_DONTWAIT, path)
    except OSError:
        _unsent += 1
        return False
    finally:
        sock.close()
    _unsent = 0
    return True
