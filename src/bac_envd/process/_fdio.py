"""Non-blocking fd I/O on the event loop: a pausable chunked reader and an ordered writer."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable


class FdReader:
    """Reads ``fd`` in chunks of at most ``chunk`` bytes while the loop says it is readable.

    ``on_data`` gets every chunk in order; ``on_eof`` runs once, at EOF or on EIO (how a
    PTY master reports that the last slave fd closed). ``pause``/``resume`` give the
    consumer back-pressure: while paused, the kernel buffer fills and the writer blocks.
    """

    def __init__(
        self, fd: int, chunk: int, on_data: Callable[[bytes], None], on_eof: Callable[[], None]
    ) -> None:
        self.fd = fd
        self._chunk = chunk
        self._on_data = on_data
        self._on_eof = on_eof
        self._loop = asyncio.get_running_loop()
        self._watching = False
        self.closed = False

    def start(self) -> None:
        self.resume()

    def pause(self) -> None:
        if self._watching:
            self._loop.remove_reader(self.fd)
            self._watching = False

    def resume(self) -> None:
        if not self._watching and not self.closed:
            self._loop.add_reader(self.fd, self._read_once)
            self._watching = True

    def _read_once(self) -> None:
        try:
            data = os.read(self.fd, self._chunk)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.EBADF):
                raise
            data = b""
        if data:
            self._on_data(data)
        else:
            self._finish()

    def drain(self) -> None:
        """Read what is buffered now (the process has exited), then close.

        Bounded: a surviving grandchild that keeps writing must not pin the loop here.
        """
        for _ in range(256):
            if self.closed:
                break
            try:
                data = os.read(self.fd, self._chunk)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                break
            self._on_data(data)
        self._finish()

    def _finish(self) -> None:
        if self.closed:
            return
        self.pause()
        self.closed = True
        os.close(self.fd)
        self._on_eof()


class FdWriter:
    """Writes byte strings to ``fd`` in call order, waiting for writability as needed."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self._lock = asyncio.Lock()
        self._waiting: asyncio.Future[None] | None = None

    async def write(self, data: bytes) -> None:
        async with self._lock:
            view = memoryview(data)
            while view:
                if self.fd is None:
                    raise BrokenPipeError(errno.EPIPE, "stdin not enabled or closed")
                try:
                    written = os.write(self.fd, view)
                except BlockingIOError:
                    await self._writable(self.fd)
                    continue
                view = view[written:]

    def close(self) -> None:
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        waiting, self._waiting = self._waiting, None
        if waiting is not None and not waiting.done():
            asyncio.get_running_loop().remove_writer(fd)
            waiting.set_exception(BrokenPipeError(errno.EPIPE, "stdin closed"))
        os.close(fd)

    async def _writable(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        self._waiting = ready
        loop.add_writer(fd, wake)
        try:
            await ready
        finally:
            self._waiting = None
            if self.fd == fd:
                loop.remove_writer(fd)
