"""The full server: asyncio + ``HttpConnection`` on the socket the bootstrap front held.

SIGTERM/SIGINT close the listener and every connection, then kill every process tree
envd started (nothing envd ran may outlive it) and return.
"""

from __future__ import annotations

import _socket
import asyncio
import signal
import socket

from bac_envd._app import EnvdApp
from bac_envd._connection import HttpConnection
from bac_envd._rpc import RpcServices
from bac_envd._state import EnvdState


async def _main(
    raw_listener: _socket.socket,
    pending: list[tuple[_socket.socket, bytes]],
    state: EnvdState,
    preload: bool,
) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    rpc = RpcServices(state)
    app = EnvdApp(state, rpc)
    connections: set[HttpConnection] = set()

    def factory() -> HttpConnection:
        return HttpConnection(app, connections)

    # asyncio wants socket.socket objects; the front made plain _socket ones.
    listener = socket.socket(fileno=raw_listener.detach())
    server = await loop.create_server(factory, sock=listener, backlog=1024)
    for raw, already_read in pending:
        conn = socket.socket(fileno=raw.detach())
        conn.setblocking(False)
        _, protocol = await loop.connect_accepted_socket(factory, conn)
        if already_read:
            protocol.data_received(already_read)
    if preload:
        rpc.preload()
    try:
        await stop.wait()
    finally:
        server.close()
        for connection in list(connections):
            connection.close()
        rpc.shutdown()


def serve(
    listener: _socket.socket,
    pending: list[tuple[_socket.socket, bytes]],
    state: EnvdState,
    *,
    preload: bool = False,
) -> None:
    asyncio.run(_main(listener, pending, state, preload))
