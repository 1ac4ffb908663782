"""Run the ASGI app under uvicorn (h11, plain asyncio) on an already listening socket."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator

from bac_envd._app import EnvdApp
from bac_envd._rpc import RpcServices
from bac_envd._state import EnvdState


def _config(app: EnvdApp) -> object:
    import uvicorn

    return uvicorn.Config(
        app,
        http="h11",
        loop="asyncio",
        ws="none",
        lifespan="off",
        interface="asgi3",
        access_log=False,
        log_config=None,
        proxy_headers=False,
        server_header=False,
        date_header=False,
        # Streams (commands, watches) stay open for minutes; a bounded shutdown wait
        # keeps SIGTERM prompt.
        timeout_graceful_shutdown=2,
        timeout_keep_alive=75,
        h11_max_incomplete_event_size=1 << 20,
    )


def _server_class() -> type:
    import uvicorn

    class EnvdServer(uvicorn.Server):
        # uvicorn re-raises SIGTERM after shutdown, which would skip envd's own cleanup
        # (killing the process trees it started); envd handles the signals itself.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return EnvdServer


async def _main(sock: socket.socket, preload: bool) -> None:
    state = EnvdState()
    rpc = RpcServices(state)
    server = _server_class()(_config(EnvdApp(state, rpc)))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, setattr, server, "should_exit", True)
    if preload:
        rpc.preload()
    try:
        await server.serve(sockets=[sock])
    finally:
        rpc.shutdown()


def serve(sock: socket.socket, *, preload: bool = False) -> None:
    asyncio.run(_main(sock, preload))
