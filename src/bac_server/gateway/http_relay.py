"""Relay one HTTP/1.1 request into a sandbox and its response back, streaming both ways.

The request body is forwarded as it arrives (chunked when the client sent it chunked, so
long-lived client streams like Connect's ``StreamInput`` flow); the response is parsed with
``httptools`` and every read is passed on at once, so each Connect stream message reaches the
client when the sandbox writes it. A client that hangs up cancels the relay and closes the
upstream connection, which is how the sandbox learns that the caller went away.

Why a hand-written relay and not httpx: measured on this machine (bench/gateway_relay.py)
httpx added 1.86 ms per request at p50, this relay 0.34 ms (direct access 0.16 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httptools
from starlette.types import Message, Receive, Scope, Send

from bac_server.gateway.http_wire import ParsedResponse, chunk, request_head
from bac_server.gateway.pool import Pool, Upstream

_READ_SIZE = 1 << 16


class UpstreamFailed(Exception):
    """The sandbox closed or broke the connection before the response was complete.

    ``started`` tells whether the response had begun (then the client connection can only
    be cut) or not (then the gateway can still answer 502).
    """

    def __init__(self, message: str, *, started: bool) -> None:
        super().__init__(message)
        self.started = started


class HttpRelay:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def relay(
        self, scope: Scope, receive: Receive, send: Send, sandbox_id: str, address: str, port: int
    ) -> None:
        """Raises ``OSError`` (nothing sent yet) when no connection could be opened."""
        chunked = any(
            n == b"transfer-encoding" and b"chunked" in v.lower() for n, v in scope["headers"]
        )
        first = await receive()
        body = first.get("body", b"")
        more = bool(first.get("more_body", False))
        head = request_head(scope, chunked)
        payload = head + (chunk(body) if chunked and body else body)
        if chunked and not more:
            payload += b"0\r\n\r\n"
        replayable = not more
        conn, reused = await self._pool.acquire(sandbox_id, address, port)
        while True:
            try:
                await self._exchange(conn, payload, more, chunked, scope, receive, send)
                return
            except _StaleConnection:
                # A pooled connection the sandbox had already closed: nothing was sent to
                # the client, and the whole request is in hand, so it is safe to resend once.
                conn.close()
                if not (reused and replayable):
                    raise UpstreamFailed(
                        "the sandbox closed the connection", started=False
                    ) from None
                conn, reused = await self._pool.connect(conn.key), False

    async def _exchange(
        self,
        conn: Upstream,
        payload: bytes,
        more: bool,
        chunked: bool,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        conn.writer.write(payload)
        state: dict[str, Any] = {"body_done": not more, "gone": False}
        main = asyncio.current_task()
        assert main is not None
        pump = asyncio.create_task(self._pump(conn, receive, more, chunked, state, main))
        try:
            keep = await self._respond(conn, send, scope["method"] == "HEAD")
        except asyncio.CancelledError:
            conn.close()
            if state["gone"] and main.uncancel() == 0:
                return  # the client hung up; the relay ends quietly
            raise
        except BaseException:
            conn.close()
            raise
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump
        if keep and state["body_done"]:
            self._pool.release(conn)
        else:
            conn.close()

    async def _pump(
        self,
        conn: Upstream,
        receive: Receive,
        more: bool,
        chunked: bool,
        state: dict[str, Any],
        main: asyncio.Task[Any],
    ) -> None:
        """Forward the rest of the request body, then wait for the client to hang up."""
        message: Message
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            data = message.get("body", b"")
            if data:
                conn.writer.write(chunk(data) if chunked else data)
                await conn.writer.drain()
            more = bool(message.get("more_body", False))
            if not more:
                if chunked:
                    conn.writer.write(b"0\r\n\r\n")
                state["body_done"] = True
        else:
            message = await receive()
        if message["type"] == "http.disconnect":
            state["gone"] = True
            main.cancel()

    async def _respond(self, conn: Upstream, send: Send, head_only: bool) -> bool:
        """Pass the response on; returns whether the connection may be reused."""
        parsed = ParsedResponse()
        parser = httptools.HttpResponseParser(parsed)
        parsed.parser = parser
        started = False
        while True:
            try:
                data = await conn.reader.read(_READ_SIZE)
            except ConnectionError as exc:
                if not started:
                    raise _StaleConnection from exc
                raise UpstreamFailed(
                    "the sandbox connection broke mid-response", started=True
                ) from exc
            if not data:
                if not started:
                    raise _StaleConnection
                if parsed.framed:
                    raise UpstreamFailed(
                        "the sandbox closed the connection mid-response", started=True
                    )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return False
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise UpstreamFailed(
                    f"the sandbox sent a malformed response: {exc}", started=started
                ) from exc
            if parsed.headers_done and not started:
                started = True
                await send(
                    {
                        "type": "http.response.start",
                        "status": parser.get_status_code(),
                        "headers": parsed.headers,
                    }
                )
                if head_only:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return False
            if parsed.body or parsed.complete:
                piece = b"".join(parsed.body)
                parsed.body.clear()
                await send(
                    {"type": "http.response.body", "body": piece, "more_body": not parsed.complete}
                )
            if parsed.complete:
                return parsed.keep_alive


class _StaleConnection(ConnectionError):
    """The upstream closed before sending a single response byte."""
