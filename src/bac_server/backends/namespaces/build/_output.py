"""A build step's output: two pipes read on the event loop, delivered as lines.

Lines are split on ``\\n`` (a trailing ``\\r`` is dropped), decoded as UTF-8 with
replacement characters, and cut every ``MAX_LINE`` bytes (at a character boundary) so a
command printing without newlines cannot make the server hold unbounded text. Lines are
held back until ``release()``: until the runtime has started the command, whatever
reaches the pipes is the runtime's own complaint, reported as a setup failure instead.

The callback runs on the event loop and must not block. If it raises, the rest of the
output is read and dropped and the exception is kept in ``error`` for the caller.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

MAX_LINE = 8192

Deliver = Callable[[str, str], None]


def _cut(data: bytes, limit: int) -> int:
    """Where to cut ``data`` at most ``limit`` bytes in, not inside a UTF-8 sequence."""
    cut = limit
    # Back off continuation bytes (10xxxxxx), at most three: a sequence is <= 4 bytes.
    while cut > limit - 3 and cut < len(data) and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return cut


class StepOutput:
    """Collects both streams; lines reach ``deliver`` in order within each stream."""

    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._held: list[tuple[str, str]] | None = []
        self._partial: dict[str, bytes] = {"stdout": b"", "stderr": b""}
        self.error: Exception | None = None

    def _send(self, stream: str, line: str) -> None:
        if self.error is not None:
            return
        try:
            self._deliver(stream, line)
        except Exception as exc:
            self.error = exc

    def release(self) -> None:
        """Deliver what was held back and everything from now on."""
        held, self._held = self._held or [], None
        for stream, line in held:
            self._send(stream, line)

    def note(self, line: str) -> None:
        """A line of the server's own about the step (on stderr, after its output)."""
        self._send("stderr", line)

    def held_text(self) -> str:
        """What arrived before ``release()`` (the runtime's error output)."""
        return "\n".join(line for _, line in self._held or [])

    def _emit(self, stream: str, raw: bytes) -> None:
        line = raw.removesuffix(b"\r").decode(errors="replace")
        if self._held is not None:
            self._held.append((stream, line))
        else:
            self._send(stream, line)

    def feed(self, stream: str, data: bytes) -> None:
        buffer = self._partial[stream] + data
        while True:
            newline = buffer.find(b"\n", 0, MAX_LINE + 1)
            if newline >= 0:
                self._emit(stream, buffer[:newline])
                buffer = buffer[newline + 1:]
            elif len(buffer) > MAX_LINE:
                cut = _cut(buffer, MAX_LINE)
                self._emit(stream, buffer[:cut])
                buffer = buffer[cut:]
            else:
                break
        self._partial[stream] = buffer

    def finish(self, stream: str) -> None:
        if self._partial[stream]:
            self._emit(stream, self._partial[stream])
            self._partial[stream] = b""

    async def pump(self, stream: str, fd: int) -> None:
        """Read ``fd`` (a pipe's read end, closed here) until every writer has gone."""
        loop = asyncio.get_running_loop()
        os.set_blocking(fd, False)
        done: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if done.done():
                return
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError as exc:
                done.set_exception(exc)
                return
            if chunk:
                self.feed(stream, chunk)
            else:
                done.set_result(None)  # EOF: every writer is gone

        loop.add_reader(fd, readable)
        try:
            await done
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        self.finish(stream)
