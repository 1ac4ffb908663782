"""A real gateway in front of real upstream HTTP servers, for gateway tests and benchmarks.

The gateway's only input from the control plane is the registry's route (sandbox id →
address); here the routes point at servers on loopback that behave like sandbox ports
(streams, uploads, WebSockets), so every byte crosses real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp
from starlette.websockets import WebSocket

from bac_server.admin import uvicorn_options
from bac_server.config import ServerConfig
from bac_server.control import LiveSandbox, Registry, SandboxState
from bac_server.gateway import Dispatcher, Gateway, GatewaySlot

ENVD_PORT = 49983


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class UpstreamState:
    """What the upstream saw, and hooks a test uses to step a stream along."""

    clients: set[tuple[str, int]] = field(default_factory=set)
    proceed: asyncio.Queue[None] = field(default_factory=asyncio.Queue)
    received: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)


def upstream_app(state: UpstreamState) -> Starlette:
    async def hello(request: Request) -> Response:
        if request.client is not None:
            state.clients.add((request.client.host, request.client.port))
        return PlainTextResponse("hello")

    async def echo(request: Request) -> Response:
        return Response(await request.body(), media_type="application/octet-stream")

    async def headers(request: Request) -> Response:
        return JSONResponse(
            {"path": request.url.path, "query": request.url.query,
             "headers": [[k, v] for k, v in request.headers.items()]}
        )

    async def stepped(request: Request) -> Response:
        count = int(request.query_params.get("n", "3"))

        async def body() -> AsyncIterator[bytes]:
            try:
                for i in range(count):
                    yield f"message {i}\n".encode()
                    if i + 1 < count:
                        await state.proceed.get()
            finally:
                state.disconnected.set()

        return StreamingResponse(body(), media_type="text/plain")

    async def forever(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            try:
                yield b"first\n"
                await asyncio.Event().wait()
            finally:
                state.disconnected.set()

        return StreamingResponse(body(), media_type="text/plain")

    async def upload(request: Request) -> Response:
        total = 0
        async for chunk in request.stream():
            if chunk:
                total += len(chunk)
                await state.received.put(chunk)
        return JSONResponse({"bytes": total})

    async def ws_echo(ws: WebSocket) -> None:
        await ws.accept(subprotocol=(ws.scope.get("subprotocols") or [None])[0])
        with contextlib.suppress(Exception):
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") is not None:
                    await ws.send_text("echo:" + message["text"])
                else:
                    await ws.send_bytes(b"echo:" + message["bytes"])

    async def ws_headers(ws: WebSocket) -> None:
        await ws.accept()
        await ws.send_json([[k, v] for k, v in ws.headers.items()])
        await ws.close()

    return Starlette(
        routes=[
            Route("/hello", hello),
            Route("/health", lambda r: Response(status_code=204)),
            Route("/echo", echo, methods=["POST", "PUT"]),
            Route("/headers", headers, methods=["GET", "POST"]),
            Route("/init", hello, methods=["GET", "POST"]),
            Route("/stepped", stepped),
            Route("/forever", forever),
            Route("/upload", upload, methods=["POST"]),
            Route("/files", headers, methods=["GET", "POST"]),
            WebSocketRoute("/ws", ws_echo),
            WebSocketRoute("/ws-headers", ws_headers),
        ]
    )


def sandbox_entry(sandbox_id: str, port: int, traffic_token: str | None = None) -> LiveSandbox:
    now = datetime.now(UTC)
    entry = LiveSandbox(
        sandbox_id=sandbox_id, team_id="t", template_id="base", alias=None, cpu_count=1,
        memory_mb=512, disk_mb=1024, envd_access_token=f"token-{sandbox_id}",
        traffic_access_token=traffic_token, metadata={}, env_vars={}, network=None,
        allow_internet_access=None, started_at=now, end_at=now + timedelta(hours=1),
        state=SandboxState.RUNNING,
    )
    entry.attach("127.0.0.1", port)
    return entry


@contextlib.asynccontextmanager
async def serving(app: ASGIApp, port: int) -> AsyncIterator[uvicorn.Server]:
    options = uvicorn_options(ServerConfig(host="127.0.0.1", port=port))
    options["lifespan"] = "off"
    options["log_level"] = "warning"
    server = uvicorn.Server(uvicorn.Config(app, **options))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield server
    finally:
        server.should_exit = True
        await task


@dataclass
class GatewayRig:
    url: str
    registry: Registry
    state: UpstreamState
    upstream_port: int
    gateway: Gateway


@contextlib.asynccontextmanager
async def gateway_rig(domain: str = "bac.test") -> AsyncIterator[GatewayRig]:
    state = UpstreamState()
    registry = Registry()
    gateway = Gateway(registry)
    api = Starlette()
    gw_port, up_port = free_port(), free_port()
    async with serving(upstream_app(state), up_port), serving(
        Dispatcher(api, domain, GatewaySlot(gateway)), gw_port
    ):
        yield GatewayRig(f"http://127.0.0.1:{gw_port}", registry, state, up_port, gateway)
    gateway.close()
