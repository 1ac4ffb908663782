"""The start-up front: answers ``/health``, ``/init`` and ``/envs`` before the server loads.

A new sandbox hears from the host only (``GET /health``, ``POST /init``) until the host has
handed it out, so envd answers those with the stdlib alone and loads asyncio, the HTTP
server and, later, the RPC stack only when a request needs them. That keeps start-up
close to a bare interpreter's and an unused sandbox's envd close to its memory.

The front never guesses: anything that is not a small, plain HTTP/1.1 ``GET /health``,
``POST /init`` or ``GET /envs`` (any other path, chunked or large bodies, ``Expect``,
pipelining, odd syntax) ends the front. The listening socket and every connection it had
accepted, with the bytes already read from each, are then handed to the real server,
which parses them from the start as if it had read them itself.

It is built on C-level modules only (``_socket``, ``select``, ``_json``): the Python
wrappers ``socket``, ``selectors`` and ``json`` pull in ``enum``, ``re`` and friends, which
cost this front more than the interpreter's own start-up (see ``bench/envd_start.py``).
"""

from __future__ import annotations

import _socket
import select
import time

from bac_envd import ENVD_VERSION
from bac_envd._errors import InitError
from bac_envd._state import EnvdState

RawSocket = _socket.socket

# What the host (and the in-sandbox code interpreter, for /envs) asks before anything else.
_ROUTES = (("GET", "/health"), ("POST", "/init"), ("GET", "/envs"))
_HEAD_LIMIT = 16 * 1024
_BODY_LIMIT = 64 * 1024
_HEAD_DEADLINE = 10.0  # a connection that sends no complete request by then is dropped
UNAUTHORIZED = (
    "unauthorized access, please provide a valid access token or method signing if supported"
)


class _Defer(Exception):
    """This request needs the real server."""


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError as exc:
        raise _Defer from exc
    if version != "HTTP/1.1":
        raise _Defer
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or name != name.strip() or name.lower() in headers:
            raise _Defer
        headers[name.lower()] = value.strip()
    return method, target, headers


def _response(status: int, reason: str, body: bytes = b"", extra: str = "") -> bytes:
    kind = "Content-Type: application/json\r\n" if body else ""
    return (
        f"HTTP/1.1 {status} {reason}\r\n{kind}{extra}"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _error(status: int, reason: str, message: str) -> bytes:
    from _json import encode_basestring_ascii

    body = f'{{"code":{status},"message":{encode_basestring_ascii(message)}}}'
    return _response(status, reason, body.encode())


class _ScanContext:
    """The attributes the C JSON scanner reads (as ``json.JSONDecoder`` provides them)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float
    memo: dict[str, str] = {}  # read by the C scanner, never mutated here


def _loads(body: bytes) -> object:
    """JSON-decode with the C scanner; any doubt goes to ``json.loads`` for its verdict."""
    text = body.decode("utf-8").strip(" \t\n\r")
    if not text:
        return None
    try:
        from _json import make_scanner

        scanner = make_scanner(_ScanContext())  # type: ignore[arg-type]  # duck-typed context
        value, end = scanner(text, 0)
        if end == len(text):
            return value
    except Exception:  # noqa: S110 - json.loads below gives the real error
        pass
    import json

    return json.loads(text)


def _answer(
    method: str, target: str, headers: dict[str, str], body: bytes, state: EnvdState
) -> bytes:
    if method == "GET" and target == "/health":
        return _response(204, "No Content")
    if not state.token_matches(headers.get("x-access-token")):
        return _error(401, "Unauthorized", UNAUTHORIZED)
    if target == "/envs":
        from _json import encode_basestring_ascii as quote

        pairs = ",".join(f"{quote(k)}:{quote(v)}" for k, v in state.env_vars.items())
        return _response(200, "OK", ("{" + pairs + "}").encode())
    try:
        state.apply_init(_loads(body))
    except (ValueError, InitError) as exc:
        return _error(400, "Bad Request", f"invalid init body: {exc}")
    extra = f"X-Envd-Version: {ENVD_VERSION}\r\nCache-Control: no-store\r\n"
    return _response(204, "No Content", extra=extra)


def _reply(data: bytes, state: EnvdState) -> bytes | None:
    """The reply to the simple health/init request in ``data``; None while it is still
    incomplete. Raises ``_Defer`` for anything else."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        if len(data) >= _HEAD_LIMIT:
            raise _Defer
        return None
    method, target, headers = _parse_head(data[:end])
    if (method, target) not in _ROUTES:
        raise _Defer
    if "transfer-encoding" in headers or "expect" in headers:
        raise _Defer
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit() or int(length_text) > _BODY_LIMIT:
        raise _Defer
    length = int(length_text)
    if len(data) < end + 4 + length:
        return None
    if len(data) > end + 4 + length:
        raise _Defer  # a pipelined second request: leave it all to the real server
    return _answer(method, target, headers, data[end + 4 :], state)


Pending = list[tuple[RawSocket, bytes]]


def serve_until_needed(
    listener: RawSocket, state: EnvdState, wake_fd: int | None = None
) -> Pending:
    """Answer health/init until a request needs the full server (or ``wake_fd`` becomes
    readable). Returns the accepted connections still unanswered, each with the bytes
    already read from it, for the real server to continue."""
    poller = select.epoll()
    poller.register(listener.fileno(), select.EPOLLIN)
    if wake_fd is not None:
        poller.register(wake_fd, select.EPOLLIN)
    conns: dict[int, RawSocket] = {}
    buffers: dict[int, bytearray] = {}
    deadlines: dict[int, float] = {}

    def drop(fd: int) -> None:
        poller.unregister(fd)
        conns.pop(fd).close()
        del buffers[fd], deadlines[fd]

    def pending() -> Pending:
        return [(conns[fd], bytes(buffers[fd])) for fd in conns]

    try:
        while True:
            soonest = min(deadlines.values(), default=None)
            timeout = -1.0 if soonest is None else max(0.0, soonest - time.monotonic())
            for fd, _ in poller.poll(timeout):
                if fd == listener.fileno():
                    try:
                        conn_fd, _ = listener._accept()  # type: ignore[attr-defined]
                    except BlockingIOError:
                        continue
                    conn = _socket.socket(fileno=conn_fd)
                    conn.setblocking(False)
                    conns[conn_fd], buffers[conn_fd] = conn, bytearray()
                    deadlines[conn_fd] = time.monotonic() + _HEAD_DEADLINE
                    poller.register(conn_fd, select.EPOLLIN)
                    continue
                if fd == wake_fd:
                    return pending()
                try:
                    chunk = conns[fd].recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    drop(fd)  # the client left without a complete request
                    continue
                buffers[fd] += chunk
                try:
                    reply = _reply(bytes(buffers[fd]), state)
                except _Defer:
                    return pending()
                if reply is None:
                    continue
                try:
                    conns[fd].settimeout(2.0)
                    conns[fd].sendall(reply)
                except OSError:
                    pass
                drop(fd)
            now = time.monotonic()
            for fd in [fd for fd, limit in deadlines.items() if limit <= now]:
                drop(fd)
    finally:
        poller.close()
