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

    def drain(self, *, keep_for_stragglers: bool = False) -> None:
        """Read what is buffered now (the process has exited), then close.

        Bounded: a surviving grandchild that keeps writing must not pin the loop here.
        ``keep_for_stragglers``: a pipe some descendant still holds open (a process it
        started and left running, such as a browser ``gtk-launch`` started) is not closed
        under it, which would kill it with SIGPIPE at its next write: what it writes
        from now on is read and dropped until it closes its end (``_Stragglers`` bounds
        how many such pipes envd keeps).
        """
        for _ in range(256):
            if self.closed:
                return
            try:
                data = os.read(self.fd, self._chunk)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                self._finish()
                return
            self._on_data(data)
        if keep_for_stragglers:
            self._on_data = _drop
            self.resume()
            _stragglers.add(self)
        else:
            self._finish()

    def _finish(self) -> None:
        if self.closed:
            return
        self.pause()
        self.closed = True
        os.close(self.fd)
        _stragglers.discard(self)
        self._on_eof()



def _drop(data: bytes) -> None:
    """Output written after its command ended: nobody reads it any more."""


class _Stragglers:
    """The pipes kept open after their command ended, oldest first, at most ``LIMIT``:
    past it the oldest is closed (its writer then gets SIGPIPE, as any process whose
    reader left), so commands that leave writers behind cannot use up envd's fds."""

    LIMIT = 256

    def __init__(self) -> None:
        self._open: dict[FdReader, None] = {}

    def add(self, reader: FdReader) -> None:
        self._open[reader] = None
        while len(self._open) > self.LIMIT:
            oldest = next(iter(self._open))
            oldest._finish()  # removes it

    def discard(self, reader: FdReader) -> None:
        self._open.pop(reader, None)

    def __len__(self) -> int:
        return len(self._open)


_stragglers = _Stragglers()


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
