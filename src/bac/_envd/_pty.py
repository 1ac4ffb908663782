"""Interactive terminals in the sandbox (``sandbox.pty``).

A PTY runs ``/bin/bash -i -l`` (or, Bac's extra, one command in a login shell) with a
terminal of the given size; its output arrives
as raw bytes (escape sequences included) through ``on_data``. Input goes through the
PTY too, so Ctrl-C (``b"\\x03"``) and Ctrl-D (``b"\\x04"``) work as on a real terminal.
"""

from __future__ import annotations

from bac._envd._command_handle import AsyncCommandHandle, OutputHandler
from bac._envd._commands import AsyncCommands, selector
from bac._envd._connection import EnvdConnection, timeout_ms
from bac._models import PtySize
from bac_protocol.envd import process_pb

DEFAULT_PTY_TIMEOUT = 60.0
TERMINAL_ENV = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def _pty(size: PtySize) -> process_pb.PTY:
    return process_pb.PTY(size=process_pb.PTY.Size(rows=size.rows, cols=size.cols))


class AsyncPty:
    """Create, drive, resize and kill pseudo-terminals in one sandbox."""

    def __init__(self, conn: EnvdConnection, commands: AsyncCommands) -> None:
        self._conn = conn
        self._commands = commands

    async def create(
        self,
        size: PtySize,
        on_data: OutputHandler[bytes],
        user: str | None = None,
        cwd: str | None = None,
        envs: dict[str, str] | None = None,
        timeout: float | None = DEFAULT_PTY_TIMEOUT,  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        request_timeout: float | None = None,
        *,
        cmd: str | None = None,
    ) -> AsyncCommandHandle:
        """Start a login shell on a new terminal; ``timeout`` 0 keeps it alive indefinitely.
        ``cmd`` (Bac's extra) runs that command on the terminal instead of an interactive
        shell, as ``commands.run`` runs it (``bash -l -c``): ``python3`` gets a prompt."""
        request = process_pb.StartRequest(
            process=process_pb.ProcessConfig(
                cmd="/bin/bash",
                args=["-i", "-l"] if cmd is None else ["-l", "-c", cmd],
                envs={**TERMINAL_ENV, **(envs or {})},
                cwd=cwd,
            ),
            pty=_pty(size),
        )
        events = self._conn.process.start(
            request,
            headers=self._conn.rpc_headers(user, stream=True),
            timeout_ms=timeout_ms(timeout),
        )
        return await self._commands._handle(
            events, request_timeout, None, None, on_pty=on_data
        )

    async def connect(
        self,
        pid: int,
        on_data: OutputHandler[bytes],
        timeout: float | None = DEFAULT_PTY_TIMEOUT,  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        request_timeout: float | None = None,
    ) -> AsyncCommandHandle:
        """Attach to the running terminal ``pid``."""
        events = self._conn.process.connect(
            process_pb.ConnectRequest(process=selector(pid)),
            headers=self._conn.rpc_headers(stream=True),
            timeout_ms=timeout_ms(timeout),
        )
        return await self._commands._handle(
            events, request_timeout, None, None, on_pty=on_data
        )

    async def send_input(
        self, pid: int, data: bytes | str, request_timeout: float | None = None
    ) -> None:
        """Type ``data`` into terminal ``pid``."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        await self._commands._send_input(pid, "pty", payload, request_timeout)

    send_stdin = send_input  # E2B's name for the same call

    async def resize(self, pid: int, size: PtySize, request_timeout: float | None = None) -> None:
        """Tell terminal ``pid`` its window changed size (programs get SIGWINCH)."""
        try:
            await self._conn.process.update(
                process_pb.UpdateRequest(process=selector(pid), pty=_pty(size)),
                headers=self._conn.rpc_headers(),
                timeout_ms=self._conn.request_timeout_ms(request_timeout),
            )
        except Exception as exc:
            await self._commands._fail(exc)

    async def kill(self, pid: int, request_timeout: float | None = None) -> bool:
        """SIGKILL the terminal's shell; False if it had already gone."""
        return await self._commands.kill(pid, request_timeout)
