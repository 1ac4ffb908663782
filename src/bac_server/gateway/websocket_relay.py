"""Relay a WebSocket session into a sandbox port, message by message, both ways.

The upstream handshake happens first, so the client is accepted with the subprotocol the
sandbox chose, or refused with the gateway's 502 JSON when the port is closed (through the
ASGI denial-response extension where the server offers it).
"""

from __future__ import annotations

import asyncio
import contextlib

from starlette.types import Receive, Scope, Send
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from bac_server.backends.dialing import DIRECT, Dialer
from bac_server.gateway.errors import PORT_CLOSED, error_body
from bac_server.gateway.headers import for_sandbox

# The handshake's own headers, which the client library makes for the upstream handshake.
_HANDSHAKE = frozenset(
    {
        b"host",
        b"sec-websocket-key",
        b"sec-websocket-version",
        b"sec-websocket-extensions",
        b"sec-websocket-protocol",
        b"sec-websocket-accept",
        b"content-length",
    }
)


async def deny(scope: Scope, send: Send, status: int, body: bytes) -> None:
    if "websocket.http.response" in scope.get("extensions", {}):
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body, "more_body": False})
    else:
        await send({"type": "websocket.close", "code": 1011})


async def relay_websocket(
    scope: Scope, receive: Receive, send: Send, sandbox_id: str, address: str, port: int,
    dialer: Dialer = DIRECT,
) -> None:
    if (await receive())["type"] != "websocket.connect":
        return
    target = scope.get("raw_path") or scope["path"].encode()
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    headers = [
        (n.decode("latin-1"), v.decode("latin-1"))
        for n, v in for_sandbox(scope["headers"])
        if n not in _HANDSHAKE
    ]
    try:
        sock = await dialer.dial(sandbox_id, address, port)
    except OSError:
        await deny(scope, send, 502, error_body(502, PORT_CLOSED, sandbox_id))
        return
    try:
        upstream = await connect(
            f"ws://{address}:{port}{target.decode('latin-1')}",
            sock=sock,
            additional_headers=headers,
            subprotocols=scope.get("subprotocols") or None,
            compression=None,
            max_size=None,
            ping_interval=None,
            proxy=None,
            user_agent_header=None,
            open_timeout=10,
        )
    except InvalidStatus as exc:
        sock.close()
        await deny(scope, send, exc.response.status_code, bytes(exc.response.body or b""))
        return
    except (OSError, InvalidHandshake, TimeoutError):
        sock.close()
        await deny(scope, send, 502, error_body(502, PORT_CLOSED, sandbox_id))
        return
    async with upstream:
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
        await _pipe(receive, send, upstream)


async def _pipe(receive: Receive, send: Send, upstream: ClientConnection) -> None:
    async def client_to_sandbox() -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                await upstream.close(message.get("code", 1000))
                return
            if message.get("bytes") is not None:
                await upstream.send(message["bytes"])
            elif message.get("text") is not None:
                await upstream.send(message["text"])

    async def sandbox_to_client() -> None:
        try:
            async for data in upstream:
                if isinstance(data, bytes):
                    await send({"type": "websocket.send", "bytes": data})
                else:
                    await send({"type": "websocket.send", "text": data})
        except ConnectionClosed:
            pass
        # 1005/1006 are never sent on the wire: map "no code" to normal, "abnormal" to error.
        code = {None: 1000, 1005: 1000, 1006: 1011}.get(upstream.close_code, upstream.close_code)
        with contextlib.suppress(Exception):
            await send({"type": "websocket.close", "code": code})

    tasks = [asyncio.create_task(client_to_sandbox()), asyncio.create_task(sandbox_to_client())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
