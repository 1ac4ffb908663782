"""envd's readiness pipe: the first thing a started sandbox tells the host.

The HTTP calls to envd (``/health``, ``/init``) are in ``bac_server.backends.envd_http``,
shared with the control plane's start snapshots.
"""

from __future__ import annotations

import asyncio
import os

from bac_server.backends.envd_http import EnvdUnavailable


async def wait_ready(read_fd: int, limit_s: float) -> None:
    """Wait for ``ready\\n`` on the pipe envd inherited as fd 3. EOF means envd died."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future[bytes] = loop.create_future()
    os.set_blocking(read_fd, False)
    buffer = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(read_fd, 64)
        except BlockingIOError:
            return
        buffer.extend(chunk)
        if (not chunk or b"\n" in buffer) and not got.done():
            got.set_result(bytes(buffer))

    loop.add_reader(read_fd, readable)
    try:
        data = await asyncio.wait_for(got, limit_s)
    except TimeoutError as exc:
        raise EnvdUnavailable(f"envd did not report ready within {limit_s:.0f}s") from exc
    finally:
        loop.remove_reader(read_fd)
    if not data.startswith(b"ready"):
        raise EnvdUnavailable("envd exited before it was ready")
