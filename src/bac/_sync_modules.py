"""Blocking twins of the process modules: commands and PTYs.

Each method runs the async implementation on the portal loop; see :mod:`bac._portal`.
"""

from __future__ import annotations

from typing import Literal, overload

from bac._command_handle import AsyncCommandHandle, OutputHandler
from bac._commands import DEFAULT_COMMAND_TIMEOUT, AsyncCommands
from bac._models import CommandResult, ProcessInfo, PtySize
from bac._portal import PORTAL
from bac._pty import DEFAULT_PTY_TIMEOUT, AsyncPty


class CommandHandle:
    """A command running in the background; blocking twin of :class:`AsyncCommandHandle`."""

    def __init__(self, inner: AsyncCommandHandle) -> None:
        self._inner = inner

    pid = property(lambda self: self._inner.pid, doc="Process id inside the sandbox.")
    stdout = property(lambda self: self._inner.stdout, doc="Stdout so far.")
    stderr = property(lambda self: self._inner.stderr, doc="Stderr so far.")
    exit_code = property(lambda self: self._inner.exit_code, doc="Exit code, once ended.")
    error = property(lambda self: self._inner.error, doc="Envd's failure description.")

    def wait(self) -> CommandResult:
        return PORTAL.run(self._inner.wait())

    def kill(self) -> bool:
        return PORTAL.run(self._inner.kill())

    def send_stdin(self, data: str | bytes, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.send_stdin(data, request_timeout))

    def close_stdin(self, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.close_stdin(request_timeout))

    def disconnect(self) -> None:
        PORTAL.run(self._inner.disconnect())


class Commands:
    """Blocking twin of :class:`AsyncCommands`; callbacks run on the SDK's loop thread."""

    def __init__(self, inner: AsyncCommands) -> None:
        self._inner = inner

    @overload
    def run(
        self, cmd: str, background: Literal[False] = False, envs: dict[str, str] | None = None,
        user: str | None = None, cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None, on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False, timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
        request_timeout: float | None = None,
    ) -> CommandResult: ...
    @overload
    def run(
        self, cmd: str, background: Literal[True], envs: dict[str, str] | None = None,
        user: str | None = None, cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None, on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False, timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
        request_timeout: float | None = None,
    ) -> CommandHandle: ...
    def run(
        self, cmd: str, background: bool = False, envs: dict[str, str] | None = None,
        user: str | None = None, cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None, on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False, timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
        request_timeout: float | None = None,
    ) -> CommandResult | CommandHandle:
        """Run ``cmd``; see :meth:`AsyncCommands.run`."""
        handle = PORTAL.run(
            self._inner.run(
                cmd, True, envs, user, cwd, on_stdout, on_stderr, stdin, timeout, request_timeout
            )
        )
        wrapped = CommandHandle(handle)
        return wrapped if background else wrapped.wait()

    def connect(
        self, pid: int, timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
        request_timeout: float | None = None, on_stdout: OutputHandler[str] | None = None,
        on_stderr: OutputHandler[str] | None = None,
    ) -> CommandHandle:
        return CommandHandle(
            PORTAL.run(self._inner.connect(pid, timeout, request_timeout, on_stdout, on_stderr))
        )

    def list(self, request_timeout: float | None = None) -> list[ProcessInfo]:
        return PORTAL.run(self._inner.list(request_timeout))

    def kill(self, pid: int, request_timeout: float | None = None) -> bool:
        return PORTAL.run(self._inner.kill(pid, request_timeout))

    def send_stdin(self, pid: int, data: str | bytes, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.send_stdin(pid, data, request_timeout))

    def close_stdin(self, pid: int, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.close_stdin(pid, request_timeout))


class Pty:
    """Blocking twin of :class:`AsyncPty`; ``on_data`` runs on the SDK's loop thread."""

    def __init__(self, inner: AsyncPty) -> None:
        self._inner = inner

    def create(
        self, size: PtySize, on_data: OutputHandler[bytes], user: str | None = None,
        cwd: str | None = None, envs: dict[str, str] | None = None,
        timeout: float | None = DEFAULT_PTY_TIMEOUT, request_timeout: float | None = None,
    ) -> CommandHandle:
        return CommandHandle(
            PORTAL.run(self._inner.create(size, on_data, user, cwd, envs, timeout, request_timeout))
        )

    def connect(
        self, pid: int, on_data: OutputHandler[bytes],
        timeout: float | None = DEFAULT_PTY_TIMEOUT, request_timeout: float | None = None,
    ) -> CommandHandle:
        return CommandHandle(
            PORTAL.run(self._inner.connect(pid, on_data, timeout, request_timeout))
        )

    def send_input(self, pid: int, data: bytes | str, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.send_input(pid, data, request_timeout))

    send_stdin = send_input

    def resize(self, pid: int, size: PtySize, request_timeout: float | None = None) -> None:
        PORTAL.run(self._inner.resize(pid, size, request_timeout))

    def kill(self, pid: int, request_timeout: float | None = None) -> bool:
        return PORTAL.run(self._inner.kill(pid, request_timeout))
