"""A running command or PTY: its output stream, exit, stdin and kill.

A background task reads the event stream as it arrives, so callbacks fire while the
caller does other work, and ``wait()`` just joins that task. Output is decoded as
incremental UTF-8 with replacement, so a multi-byte character split across chunks is
decoded whole and invalid bytes become U+FFFD instead of an exception.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Protocol, TypeVar

from protobuf import Oneof

from bac import _errors as e
from bac._envd._connection import await_opening
from bac._envd._errors import HealthProbe, translate
from bac._models import CommandResult

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class OutputHandler(Protocol[T_contra]):
    """A callback for streamed output; may be a plain function or a coroutine function."""

    def __call__(self, data: T_contra, /) -> Awaitable[None] | None: ...


class ProcessControl(Protocol):
    """What a handle needs from the commands module to act on its process."""

    async def kill(self, pid: int) -> bool: ...
    async def send_stdin(
        self, pid: int, data: str | bytes, request_timeout: float | None = None
    ) -> None: ...
    async def close_stdin(self, pid: int, request_timeout: float | None = None) -> None: ...


async def _call(handler: OutputHandler[T] | None, data: T) -> None:
    if handler is None:
        return
    result = handler(data)
    if inspect.isawaitable(result):
        await result


class AsyncCommandHandle:
    """A command started in the background (or reconnected to) in the sandbox."""

    def __init__(
        self,
        events: AsyncIterator[Any],
        control: ProcessControl,
        probe: HealthProbe,
        *,
        on_stdout: OutputHandler[str] | None = None,
        on_stderr: OutputHandler[str] | None = None,
        on_pty: OutputHandler[bytes] | None = None,
    ) -> None:
        self._pid = 0
        self._started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._events = events
        self._control = control
        self._probe = probe
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self._on_pty = on_pty
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._out = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._err = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._result: CommandResult | None = None
        self._failure: BaseException | None = None
        self._task = asyncio.create_task(self._pump())

    @classmethod
    async def open(
        cls,
        events: AsyncIterator[Any],
        control: ProcessControl,
        probe: HealthProbe,
        request_timeout: float | None,
        *,
        on_stdout: OutputHandler[str] | None = None,
        on_stderr: OutputHandler[str] | None = None,
        on_pty: OutputHandler[bytes] | None = None,
    ) -> AsyncCommandHandle:
        """Start reading ``events`` and return once envd reports the process started."""
        handle = cls(
            events, control, probe, on_stdout=on_stdout, on_stderr=on_stderr, on_pty=on_pty
        )
        await await_opening(handle._started, handle._task, request_timeout, "process stream")
        return handle

    @property
    def pid(self) -> int:
        """Process id inside the sandbox."""
        return self._pid

    @property
    def stdout(self) -> str:
        """Everything the command wrote to stdout so far."""
        return "".join(self._stdout)

    @property
    def stderr(self) -> str:
        """Everything the command wrote to stderr so far."""
        return "".join(self._stderr)

    @property
    def exit_code(self) -> int | None:
        """Exit code once the command has ended, else None."""
        return self._result.exit_code if self._result else None

    @property
    def error(self) -> str | None:
        """Envd's description of how the command failed, if it did."""
        return self._result.error if self._result else None

    async def _emit(self, stream: str, chunk: bytes, final: bool = False) -> None:
        if stream == "stdout":
            text = self._out.decode(chunk, final)
            if text:
                self._stdout.append(text)
                await _call(self._on_stdout, text)
        else:
            text = self._err.decode(chunk, final)
            if text:
                self._stderr.append(text)
                await _call(self._on_stderr, text)

    def _on_start(self, event: Any) -> None:
        match event:
            case Oneof(field="start", value=start):
                self._pid = int(start.pid)
                self._started.set_result(self._pid)
            case _:
                raise e.ServerError(f"envd's first process event was not a start: {event!r}")

    async def _pump(self) -> None:
        try:
            async for response in self._events:
                event = response.event.event if response.event is not None else None
                if not self._started.done():
                    self._on_start(event)
                    continue
                match event:
                    case Oneof(field="data", value=data):
                        match data.output:
                            case Oneof(field="pty", value=chunk):
                                await _call(self._on_pty, bytes(chunk))
                            case Oneof(field=stream, value=chunk):
                                await self._emit(stream, bytes(chunk))
                    case Oneof(field="end", value=end):
                        await self._emit("stdout", b"", final=True)
                        await self._emit("stderr", b"", final=True)
                        self._result = CommandResult(
                            stdout=self.stdout,
                            stderr=self.stderr,
                            exit_code=end.exit_code,
                            error=end.error if end.has_field("error") else None,
                        )
        except Exception as exc:
            failure = await translate(exc, self._probe)
            if isinstance(failure, asyncio.CancelledError):
                raise failure from None  # disconnect() arrived wrapped by connectrpc
            self._failure = failure
        finally:
            with contextlib.suppress(Exception):
                await self._events.aclose()  # type: ignore[attr-defined]
            if not self._started.done():
                never = e.ServerError("envd closed the process stream before it started")
                self._started.set_exception(self._failure or never)

    async def wait(self) -> CommandResult:
        """Wait for the command to end; raise :class:`CommandExitError` if it failed."""
        await asyncio.shield(self._task)
        if self._failure is not None:
            raise self._failure
        if self._result is None:
            raise e.SandboxUnreachableError(
                f"the stream of process {self._pid} ended without an exit event"
            )
        if self._result.exit_code != 0:
            raise e.CommandExitError(
                stdout=self._result.stdout,
                stderr=self._result.stderr,
                exit_code=self._result.exit_code,
                error=self._result.error,
            )
        return self._result

    async def kill(self) -> bool:
        """SIGKILL the process; False if it had already gone."""
        return await self._control.kill(self._pid)

    async def send_stdin(self, data: str | bytes, request_timeout: float | None = None) -> None:
        """Write to the process's stdin (it must have been started with ``stdin=True``)."""
        await self._control.send_stdin(self._pid, data, request_timeout)

    async def close_stdin(self, request_timeout: float | None = None) -> None:
        """Close stdin, so the process reads end-of-file."""
        await self._control.close_stdin(self._pid, request_timeout)

    async def disconnect(self) -> None:
        """Stop receiving output; the process keeps running (reattach with ``connect``)."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

