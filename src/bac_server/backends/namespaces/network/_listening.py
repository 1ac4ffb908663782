"""A TCP listener that a cancellation never leaves open.

``asyncio.start_server`` makes, binds and starts serving its socket, then yields once to
the loop; a task cancelled at that instant loses the server while its socket stays bound
and served by the loop (until the loop closes: a port a later listen on the same address
finds taken). Listeners opened on a create's path and by the namespace stock's refill,
which is cancelled when the server stops, go through ``open_listener``: the server is
made without serving (no yield once the socket exists), then started, and closed if
the start is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def open_listener(handler: Handler, address: str, port: int,
                        **options: Any) -> asyncio.Server:
    """Serve ``handler`` on ``address``:``port``; nothing stays open if cancelled."""
    server = await asyncio.start_server(handler, address, port, start_serving=False,
                                        **options)
    try:
        await server.start_serving()
    except BaseException:
        server.close()
        raise
    return server
