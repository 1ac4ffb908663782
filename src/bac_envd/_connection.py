"""One HTTP/1.1 connection: h11 parses and frames, this runs the ASGI app per request.

Why not uvicorn: importing it costs about as much as asyncio itself on the sandbox's
Python (click, logging.config, ssl, its supervisors), and envd needs only plain HTTP/1.1
with streaming bodies, which h11 already gets right. Measured in ``bench/envd_start.py``.

Flow control both ways: request bodies pause reading beyond 256 KiB buffered, responses
wait while the transport's write buffer is full. A reply may go out before its request's
body has arrived (a refusal does not wait for it): the rest of that body, up to 1 MiB, is
then read and dropped, so the client can reuse the connection as the reply told it to.
A longer unread body, a protocol error, or ``Connection: close`` ends the connection
after the reply.
(A little over 250 lines: the connection and its per-request exchange share all state.)
"""

from __future__ import annotations

import asyncio
import socket
import sys
import traceback
from collections import deque
from typing import Any
from urllib.parse import unquote

import h11

from bac_envd._http import ASGIApp, Message, client_gone

_READ_HIGH = 256 * 1024
_IDLE_SECONDS = 600.0  # longer than clients keep idle connections (e2b SDK: 300 s)
_DRAIN_LIMIT = 1024 * 1024  # the most of a refused body read to keep its connection


class _Cycle:
    """One request/response exchange: the request body as it arrives, and its end."""

    def __init__(self, conn: HttpConnection) -> None:
        self.conn = conn
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.complete = False  # EndOfMessage seen
        self.final_given = False  # the app got more_body=False
        self.ended = False  # the response is done or the connection is gone
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def notify(self) -> None:
        self.wake.set()

    async def receive(self) -> Message:
        conn = self.conn
        if conn.h11.they_are_waiting_for_100_continue and not conn.closed:
            conn.write(h11.InformationalResponse(status_code=100, headers=[]))
        while True:
            if self.body:
                chunk = self.body.popleft()
                self.buffered -= len(chunk)
                if self.buffered <= _READ_HIGH // 4:
                    conn.resume_reading()
                last = self.complete and not self.body
                self.final_given = last
                return {"type": "http.request", "body": chunk, "more_body": not last}
            if self.complete and not self.final_given:
                self.final_given = True
                return {"type": "http.request", "body": b"", "more_body": False}
            if conn.closed or self.ended:
                return {"type": "http.disconnect"}
            self.wake.clear()
            await self.wake.wait()

    async def send(self, message: Message) -> None:
        conn = self.conn
        if conn.closed or self.ended:
            return  # the client is gone: ASGI apps expect sends to become no-ops
        kind = message["type"]
        if kind == "http.response.start":
            headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", ())]
            conn.write(h11.Response(status_code=message["status"], headers=headers))
        elif kind == "http.response.body":
            body = message.get("body", b"")
            if body:
                conn.write(h11.Data(data=body))
            if not message.get("more_body", False):
                conn.write(h11.EndOfMessage())
            await conn.drained()


class HttpConnection(asyncio.Protocol):
    def __init__(self, app: ASGIApp, connections: set[HttpConnection]) -> None:
        self.app = app
        self.connections = connections
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.cycle: _Cycle | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._reading = True
        self._idle: asyncio.TimerHandle | None = None
        self._peer: dict[str, Any] = {}
        self._drain_left: int | None = None  # reading past a refused body when set

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.connections.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # Replies go out as several small writes (head, chunks, end): never Nagle them.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._peer = {
            "client": transport.get_extra_info("peername"),
            "server": transport.get_extra_info("sockname"),
        }
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        self.h11.receive_data(data)
        self._pump()

    def eof_received(self) -> bool:
        self.h11.receive_data(b"")
        self._pump()
        return True  # keep our half open: a streamed reply may still be going out

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.connections.discard(self)
        self._writable.set()
        if self.cycle is not None:
            self.cycle.notify()
        if self._idle is not None:
            self._idle.cancel()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- parsing --------------------------------------------------------------------------

    def _pump(self) -> None:
        while not self.closed:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._reject(exc)
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            cycle = self.cycle
            if self._drain_left is not None:
                self._drain(event)
            elif isinstance(event, h11.Request):
                self._start(event)
            elif isinstance(event, h11.Data) and cycle is not None:
                cycle.body.append(bytes(event.data))
                cycle.buffered += len(event.data)
                if cycle.buffered > _READ_HIGH:
                    self._pause_reading()
                cycle.notify()
            elif isinstance(event, h11.EndOfMessage) and cycle is not None:
                cycle.complete = True
                cycle.notify()
            elif isinstance(event, h11.ConnectionClosed):
                self.close()
                return

    def _reject(self, exc: h11.RemoteProtocolError) -> None:
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE) and self.cycle is None:
            body = b'{"code":400,"message":"malformed HTTP request"}'
            headers = [("content-type", "application/json"), ("content-length", str(len(body)))]
            self.write(h11.Response(status_code=400, headers=headers))
            self.write(h11.Data(data=body))
            self.write(h11.EndOfMessage())
        self.close()

    def _start(self, request: h11.Request) -> None:
        if self._idle is not None:
            self._idle.cancel()
        path, _, query = request.target.decode("latin-1").partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version.decode(),
            "method": request.method.decode("ascii"),
            "scheme": "http",
            "path": unquote(path),
            "raw_path": path.encode("latin-1"),
            "query_string": query.encode("latin-1"),
            "root_path": "",
            "headers": [(bytes(k).lower(), bytes(v)) for k, v in request.headers],
            "extensions": {},
            **self._peer,
        }
        self.cycle = _Cycle(self)
        # The cycle holds its task: the loop itself keeps only a weak reference.
        self.cycle.task = asyncio.get_running_loop().create_task(self._run(scope, self.cycle))

    async def _run(self, scope: dict[str, Any], cycle: _Cycle) -> None:
        client_gone.set(lambda: self.closed)  # this task's own context
        try:
            await self.app(scope, cycle.receive, cycle.send)
        except Exception:  # a failing request must not take envd down
            traceback.print_exc(file=sys.stderr)
            self._fail()
        finally:
            cycle.ended = True
            cycle.notify()
            self._finish_cycle()

    def _fail(self) -> None:
        """Answer 500 if nothing was sent yet; otherwise the connection is unusable."""
        if self.h11.our_state is h11.SEND_RESPONSE and not self.closed:
            headers = [("content-length", "0")]
            try:
                self.write(h11.Response(status_code=500, headers=headers))
                self.write(h11.EndOfMessage())
            except h11.LocalProtocolError:
                pass
        self.close()

    def _finish_cycle(self) -> None:
        self.cycle = None
        if self.closed:
            return
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.SEND_BODY:
            # Replied before the body arrived: read the rest of it, then go on.
            self._drain_left = _DRAIN_LIMIT
            self.resume_reading()
            self._arm_idle()
            self._pump()
            return
        if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
            self.close()  # Connection: close, or a broken reply
            return
        self._next_cycle()
        self._pump()  # a pipelined request may already be buffered

    def _drain(self, event: Any) -> None:
        """Drop what is left of a request body already answered."""
        assert self._drain_left is not None
        if isinstance(event, h11.Data):
            self._drain_left -= len(event.data)
            if self._drain_left < 0:
                self.close()  # too much to read for a reply already given
        elif isinstance(event, h11.EndOfMessage):
            self._drain_left = None
            if self._idle is not None:
                self._idle.cancel()
            if self.h11.their_state is not h11.DONE:
                self.close()  # the request asked for Connection: close
                return
            self._next_cycle()  # the pump that called this goes on with the next request
        else:  # ConnectionClosed: the client went away mid-body
            self.close()

    def _next_cycle(self) -> None:
        self.h11.start_next_cycle()
        self.resume_reading()
        self._arm_idle()

    # -- plumbing ----------------------------------------------------------------------

    def write(self, event: Any) -> None:
        data = self.h11.send(event)
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    async def drained(self) -> None:
        if not self._writable.is_set():
            await self._writable.wait()

    def _pause_reading(self) -> None:
        if self._reading and self.transport is not None:
            self._reading = False
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if not self._reading and self.transport is not None and not self.closed:
            self._reading = True
            self.transport.resume_reading()

    def _arm_idle(self) -> None:
        self._idle = asyncio.get_running_loop().call_later(_IDLE_SECONDS, self.close)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
