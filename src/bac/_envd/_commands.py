"""Running commands in the sandbox (``sandbox.commands``).

Commands run as ``/bin/bash -l -c <cmd>``, like E2B's SDK, so shell syntax, the login
environment and ``PATH`` from profile files behave the same in both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, NoReturn, overload

from protobuf import Oneof

from bac import _errors as e
from bac._envd._command_handle import AsyncCommandHandle, OutputHandler
from bac._envd._connection import EnvdConnection, timeout_ms
from bac._envd._errors import reraise
from bac._models import CommandResult, ProcessInfo
from bac_protocol.envd import process_pb

DEFAULT_COMMAND_TIMEOUT = 60.0


def selector(pid: int) -> process_pb.ProcessSelector:
    choice: Oneof[Literal["pid"], int] = Oneof("pid", pid)
    return process_pb.ProcessSelector(selector=choice)


class AsyncCommands:
    """Start, list, signal and feed processes in one sandbox."""

    def __init__(self, conn: EnvdConnection) -> None:
        self._conn = conn

    async def _fail(self, exc: BaseException) -> NoReturn:
        await reraise(exc, self._conn.is_healthy)

    async def list(self, request_timeout: float | None = None) -> list[ProcessInfo]:
        """Every process started through envd that is still running (commands and PTYs)."""
        try:
            res = await self._conn.process.list(
                process_pb.ListRequest(),
                headers=self._conn.rpc_headers(),
                timeout_ms=self._conn.request_timeout_ms(request_timeout),
            )
        except Exception as exc:
            await self._fail(exc)
        infos = []
        for proc in res.processes:
            config = proc.config or process_pb.ProcessConfig()
            infos.append(
                ProcessInfo(
                    pid=proc.pid,
                    tag=proc.tag if proc.has_field("tag") else None,
                    cmd=config.cmd,
                    args=list(config.args),
                    envs=dict(config.envs),
                    cwd=config.cwd if config.has_field("cwd") else None,
                )
            )
        return infos

    async def kill(self, pid: int, request_timeout: float | None = None) -> bool:
        """SIGKILL process ``pid``; False if no such process exists."""
        try:
            await self._conn.process.send_signal(
                process_pb.SendSignalRequest(
                    process=selector(pid), signal=process_pb.Signal.SIGKILL
                ),
                headers=self._conn.rpc_headers(),
                timeout_ms=self._conn.request_timeout_ms(request_timeout),
            )
        except Exception as exc:
            try:
                await self._fail(exc)
            except e.NotFoundError:
                return False
        return True

    async def send_stdin(
        self, pid: int, data: str | bytes, request_timeout: float | None = None
    ) -> None:
        """Write ``data`` to the stdin of process ``pid``."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        await self._send_input(pid, "stdin", payload, request_timeout)

    async def _send_input(
        self, pid: int, kind: Literal["stdin", "pty"], payload: bytes, request_timeout: float | None
    ) -> None:
        if kind == "pty":
            pty: Oneof[Literal["pty"], bytes] = Oneof("pty", payload)
            data = process_pb.ProcessInput(input=pty)
        else:
            stdin: Oneof[Literal["stdin"], bytes] = Oneof("stdin", payload)
            data = process_pb.ProcessInput(input=stdin)
        try:
            await self._conn.process.send_input(
                process_pb.SendInputRequest(
                    process=selector(pid), input=data
                ),
                headers=self._conn.rpc_headers(),
                timeout_ms=self._conn.request_timeout_ms(request_timeout),
            )
        except Exception as exc:
            await self._fail(exc)

    async def close_stdin(self, pid: int, request_timeout: float | None = None) -> None:
        """Close the stdin of process ``pid`` so it reads end-of-file."""
        try:
            await self._conn.process.close_stdin(
                process_pb.CloseStdinRequest(process=selector(pid)),
                headers=self._conn.rpc_headers(),
                timeout_ms=self._conn.request_timeout_ms(request_timeout),
            )
        except Exception as exc:
            await self._fail(exc)

    @overload
    async def run(
        self,
        cmd: str,
        background: Literal[False] = False,
        envs: dict[str, str] | None = None,
        user: str | None = None,
        cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None,
        on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False,
        timeout: float | None = DEFAULT_COMMAND_TIMEOUT,  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        request_timeout: float | None = None,
    ) -> CommandResult: ...

    @overload
    async def run(
        self,
        cmd: str,
        background: Literal[True],
        envs: dict[str, str] | None = None,
        user: str | None = None,
        cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None,
        on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False,
        timeout: float | None = DEFAULT_COMMAND_TIMEOUT,  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        request_timeout: float | None = None,
    ) -> AsyncCommandHandle: ...

    async def run(
        self,
        cmd: str,
        background: bool = False,
        envs: dict[str, str] | None = None,
        user: str | None = None,
        cwd: str | None = None,
        on_stdout: OutputHandler[str] | None = None,
        on_stderr: OutputHandler[str] | None = None,
        stdin: bool = False,
        timeout: float | None = DEFAULT_COMMAND_TIMEOUT,  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        request_timeout: float | None = None,
    ) -> CommandResult | AsyncCommandHandle:
        """Run ``cmd`` in a login shell.

        In the foreground (default) this waits and returns a :class:`CommandResult`, or
        raises :class:`CommandExitError` on a non-zero exit. With ``background=True`` it
        returns a handle as soon as the process has started. ``timeout`` bounds the
        process's whole life in seconds (0: unlimited); ``request_timeout`` bounds only
        the wait for it to start. ``stdin=True`` keeps stdin open for ``send_stdin``.
        """
        request = process_pb.StartRequest(
            process=process_pb.ProcessConfig(
                cmd="/bin/bash", args=["-l", "-c", cmd], envs=envs or {}, cwd=cwd
            ),
            stdin=stdin,
        )
        events = self._conn.process.start(
            request,
            headers=self._conn.rpc_headers(user, stream=True),
            timeout_ms=timeout_ms(timeout),
        )
        handle = await self._handle(events, request_timeout, on_stdout, on_stderr)
        return handle if background else await handle.wait()

    async def connect(
        self,
        pid: int,
        timeout: float | None = DEFAULT_COMMAND_TIMEOUT,  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        request_timeout: float | None = None,
        on_stdout: OutputHandler[str] | None = None,
        on_stderr: OutputHandler[str] | None = None,
    ) -> AsyncCommandHandle:
        """Attach to running process ``pid``; output from now on is delivered."""
        events = self._conn.process.connect(
            process_pb.ConnectRequest(process=selector(pid)),
            headers=self._conn.rpc_headers(stream=True),
            timeout_ms=timeout_ms(timeout),
        )
        return await self._handle(events, request_timeout, on_stdout, on_stderr)

    async def _handle(
        self,
        events: AsyncIterator[Any],
        request_timeout: float | None,
        on_stdout: OutputHandler[str] | None,
        on_stderr: OutputHandler[str] | None,
        on_pty: OutputHandler[bytes] | None = None,
    ) -> AsyncCommandHandle:
        try:
            return await AsyncCommandHandle.open(
                events,
                self,
                self._conn.is_healthy,
                self._conn.config.timeout(request_timeout),
                on_stdout=on_stdout,
                on_stderr=on_stderr,
                on_pty=on_pty,
            )
        except Exception as exc:
            await self._fail(exc)
