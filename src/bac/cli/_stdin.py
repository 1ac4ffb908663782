"""Reading local stdin without blocking the event loop or a thread forever.

Pipes and terminals are watched with the loop's reader callbacks, so an idle pipe that
never closes cannot keep the process alive after the remote command ends. Regular
files (which epoll refuses) and in-memory streams are read in a worker thread, which
is safe because such reads never block indefinitely.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import AsyncIterator

CHUNK = 64 * 1024


def _fileno() -> int | None:
    try:
        return sys.stdin.fileno()
    except (OSError, ValueError, io.UnsupportedOperation, AttributeError):
        return None


async def stdin_chunks() -> AsyncIterator[bytes]:
    """Chunks of stdin as they become available, ending at end-of-file."""
    loop = asyncio.get_running_loop()
    fd = _fileno()
    if fd is not None:
        queue: asyncio.Queue[bytes] = asyncio.Queue()

        def readable() -> None:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(fd)
            queue.put_nowait(data)

        try:
            loop.add_reader(fd, readable)
        except (PermissionError, ValueError, OSError):
            pass  # a regular file: fall through to plain reads
        else:
            try:
                while chunk := await queue.get():
                    yield chunk
            finally:
                loop.remove_reader(fd)
            return
    reader = getattr(sys.stdin, "buffer", None)
    if reader is None:
        return
    while chunk := await asyncio.to_thread(reader.read1, CHUNK):
        yield chunk
