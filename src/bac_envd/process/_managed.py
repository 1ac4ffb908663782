"""One started process: its output fan-out to subscribers, its input, its end.

Lifecycle (transitions only along the table)::

    RUNNING ──reaped──▶ EXITED ──30 s later──▶ FORGOTTEN

Output is read in ≤32 KiB (pipes) / ≤16 KiB (PTY) chunks and handed to every current
subscriber; with no subscriber it is discarded (E2B semantics: no replay). A subscriber
that falls 64 chunks behind pauses the readers, so a slow client slows the process down
instead of growing envd's memory. On exit the pipes are drained before the end event,
so a subscriber always sees all output, then exactly one end.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from bac_envd import _trace
from bac_envd.process._exit import ExitInfo
from bac_envd.process._fdio import FdReader, FdWriter
from bac_envd.process._spawn import Spawned, set_winsize
from bac_envd.process._tree import kill_tree

STD_CHUNK = 32 * 1024
PTY_CHUNK = 16 * 1024
_HIGH_WATER = 64


class ProcState(enum.Enum):
    RUNNING = "running"
    EXITED = "exited"
    FORGOTTEN = "forgotten"


_TRANSITIONS = {
    ProcState.RUNNING: {ProcState.EXITED},
    ProcState.EXITED: {ProcState.FORGOTTEN},
    ProcState.FORGOTTEN: set(),
}


class InputError(Exception):
    """Input cannot go to this process (no stdin, stdin closed, PTY/pipe mismatch)."""


@dataclass(frozen=True)
class ProcessSpec:
    """The command as the client asked for it (what ``List`` reports back)."""

    cmd: str
    args: tuple[str, ...]
    envs: dict[str, str]
    cwd: str | None
    tag: str | None


@dataclass(frozen=True)
class DataChunk:
    stream: str  # "stdout" | "stderr" | "pty"
    data: bytes


Event = DataChunk | ExitInfo


class Subscription:
    """One reader of a process's events (an attached Start/Connect stream)."""

    def __init__(self, proc: ManagedProcess) -> None:
        self._proc = proc
        self._items: deque[Event] = deque()
        self._wake = asyncio.Event()

    def push(self, event: Event) -> None:
        self._items.append(event)
        self._wake.set()

    @property
    def backlog(self) -> int:
        return len(self._items)

    async def next(self, within: float | None) -> Event | None:
        """The next event, or None when ``within`` seconds pass without one."""
        if not self._items:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), within)
            except TimeoutError:
                return None
        event = self._items.popleft()
        self._proc.flow_changed()
        return event

    def close(self) -> None:
        self._proc.unsubscribe(self)


class ManagedProcess:
    def __init__(self, spawned: Spawned, spec: ProcessSpec, *, user: str = "",
                 cwd: str = "") -> None:
        self.pid = spawned.pid
        self.spec = spec
        self.user = user
        self.cwd = cwd
        self.started_at = time.time()
        self._started = time.monotonic()
        self.out_bytes = {"stdout": 0, "stderr": 0, "pty": 0}
        # The last bytes of its output (a terminal's counts as stdout), for the trace.
        self.tails = {"stdout": bytearray(), "stderr": bytearray()}
        self.timed_out = False
        # The Start stream that launched it ended before the process did, or its
        # connection is gone (``client_gone``, set by the service).
        self.client_left = False
        self.client_gone: Callable[[], bool] = lambda: False
        self.is_pty = spawned.pty_fd is not None
        self.state = ProcState.RUNNING
        self.exit: ExitInfo | None = None
        self._popen = spawned.popen
        self._subs: set[Subscription] = set()
        self._paused = False
        self._ended = asyncio.Event()
        self._lifetime: asyncio.TimerHandle | None = None
        self._readers: list[FdReader] = []
        if spawned.pty_fd is not None:
            # The writer gets its own fd: the reader closes the master at EIO while input
            # may still be in flight.
            self._pty_fd: int | None = os.dup(spawned.pty_fd)
            self._writer: FdWriter | None = FdWriter(self._pty_fd)
            self._readers.append(self._reader(spawned.pty_fd, "pty", PTY_CHUNK))
        else:
            self._pty_fd = None
            self._writer = FdWriter(spawned.stdin_fd) if spawned.stdin_fd is not None else None
            for fd, name in ((spawned.stdout_fd, "stdout"), (spawned.stderr_fd, "stderr")):
                if fd is not None:
                    self._readers.append(self._reader(fd, name, STD_CHUNK))
        for reader in self._readers:
            reader.start()

    def _reader(self, fd: int, stream: str, chunk: int) -> FdReader:
        tail = self.tails["stderr" if stream == "stderr" else "stdout"]

        def on_data(data: bytes) -> None:
            self.out_bytes[stream] += len(data)
            if len(data) >= _trace.TAIL:
                tail[:] = data[-_trace.TAIL:]
            else:
                tail.extend(data)
                del tail[:-_trace.TAIL]
            event = DataChunk(stream, data)
            for sub in self._subs:
                sub.push(event)
            self.flow_changed()

        return FdReader(fd, chunk, on_data, lambda: None)

    def transition(self, new: ProcState) -> None:
        if new not in _TRANSITIONS[self.state]:
            raise RuntimeError(f"process {self.pid}: {self.state.value} -> {new.value}")
        self.state = new

    # -- subscribers ---------------------------------------------------------------

    def subscribe(self) -> Subscription:
        sub = Subscription(self)
        if self.exit is not None:
            sub.push(self.exit)
        else:
            self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)
        self.flow_changed()

    def flow_changed(self) -> None:
        congested = any(sub.backlog >= _HIGH_WATER for sub in self._subs)
        if congested != self._paused and self.state is ProcState.RUNNING:
            self._paused = congested
            for reader in self._readers:
                reader.pause() if congested else reader.resume()

    # -- control ---------------------------------------------------------------------

    async def write_input(self, data: bytes, *, pty: bool) -> None:
        if pty != self.is_pty:
            if self.is_pty:
                raise InputError("tty assigned to process — input should be written to the pty")
            raise InputError("tty not assigned to process — input should be written to stdin")
        if self._writer is None or self._writer.fd is None:
            raise InputError("stdin not enabled or closed")
        try:
            await self._writer.write(data)
        except OSError as exc:
            raise InputError(f"error writing to process {self.pid}: {exc.strerror}") from exc

    def close_stdin(self) -> None:
        if self.is_pty:
            raise InputError("cannot close stdin for PTY process — send Ctrl+D (0x04) instead")
        if self._writer is not None:
            self._writer.close()

    def resize(self, cols: int, rows: int) -> None:
        if self._pty_fd is None:
            raise InputError("tty not assigned to process")
        set_winsize(self._pty_fd, cols, rows)

    def signal(self, signum: int) -> None:
        """SIGKILL ends the whole tree; other signals go to the process group."""
        if self.state is not ProcState.RUNNING:
            return
        kill_tree(self.pid, signum)

    async def wait_reaped(self, within: float) -> None:
        """Return once the process has been reaped, or after ``within`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), within)

    def set_lifetime(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self._lifetime = loop.call_later(seconds, self._expire)

    def _expire(self) -> None:
        if self.state is ProcState.RUNNING:
            self.timed_out = True
            self.signal(signal.SIGKILL)

    # -- end ---------------------------------------------------------------------------

    def reaped(self, wait_status: int) -> None:
        """Called by the table once waitpid() returned this pid's status."""
        self._popen.returncode = os.waitstatus_to_exitcode(wait_status)
        if self._lifetime is not None:
            self._lifetime.cancel()
        for reader in self._readers:
            # A pipe's other end may still be held by a descendant left running; a
            # terminal's session ends with its leader (the kernel hangs it up anyway).
            reader.drain(keep_for_stragglers=not self.is_pty)
        if self._writer is not None:
            self._writer.close()
        self._pty_fd = None
        self.exit = ExitInfo.from_wait_status(wait_status)
        self.transition(ProcState.EXITED)
        self._ended.set()
        for sub in self._subs:
            sub.push(self.exit)
        self._subs.clear()
        self._report(wait_status)

    def _report(self, wait_status: int) -> None:
        """Tell the host what ran (``bac_envd._trace``); never raises into the reaper."""
        command = " ".join((self.spec.cmd, *self.spec.args))
        fields: dict[str, object] = {
            "pid": self.pid, "cmd": _trace.clip(command), "user": self.user,
            "cwd": self.cwd, "tag": self.spec.tag, "pty": self.is_pty,
            "started_at": round(self.started_at, 6),
            "duration_ms": round((time.monotonic() - self._started) * 1000, 3),
            "stdout_bytes": self.out_bytes["stdout"] + self.out_bytes["pty"],
            "stderr_bytes": self.out_bytes["stderr"],
            "timed_out": self.timed_out,
            "client_left": self.client_left or self.client_gone(),
        }
        for name, tail in self.tails.items():
            if tail:
                fields[f"{name}_tail"] = _trace.tail_text(bytes(tail))
        if os.WIFSIGNALED(wait_status):
            fields["signal"] = os.WTERMSIG(wait_status)
        else:
            fields["exit_code"] = self.exit.exit_code if self.exit is not None else -1
        _trace.report("process", fields)
