"""The unary/client-stream half of process.Process: input, signals, PTY resize.

Only running processes accept these; a retained exited process answers not_found
(so the SDK's kill() returns False for it, as with E2B envd).
"""

from __future__ import annotations

import signal
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError

from bac_envd._state import EnvdState
from bac_envd.process._managed import InputError, ManagedProcess, ProcState
from bac_envd.process._table import ProcessNotFound, ProcessTable
from bac_protocol.envd import process_pb as pb

_SIGNALS = {pb.Signal.SIGKILL: signal.SIGKILL, pb.Signal.SIGTERM: signal.SIGTERM}
_KILL_REAP_S = 2.0


async def _write(proc: ManagedProcess, process_input: Any) -> None:
    choice = process_input.input if process_input is not None else None
    if choice is None or choice.field not in ("stdin", "pty"):
        raise ConnectError(Code.UNIMPLEMENTED, "invalid input type")
    try:
        await proc.write_input(choice.value, pty=choice.field == "pty")
    except InputError as exc:
        target = "tty" if choice.field == "pty" else "stdin"
        raise ConnectError(Code.INTERNAL, f"error writing to {target}: {exc}") from exc


class ProcessControl:
    def __init__(self, state: EnvdState, table: ProcessTable) -> None:
        self._state = state
        self._table = table

    def _select(self, selector: Any, *, live: bool = True) -> ManagedProcess:
        choice = selector.selector if selector is not None else None
        try:
            if choice is not None and choice.field == "pid":
                proc = self._table.by_pid(choice.value)
            elif choice is not None and choice.field == "tag":
                proc = self._table.by_tag(choice.value)
            else:
                raise ConnectError(Code.INVALID_ARGUMENT, "process selector is required")
        except ProcessNotFound as exc:
            raise ConnectError(Code.NOT_FOUND, str(exc)) from exc
        if live and proc.state is not ProcState.RUNNING:
            what = f"pid {proc.pid}" if choice.field == "pid" else f"tag {choice.value}"
            raise ConnectError(Code.NOT_FOUND, f"process with {what} not found")
        return proc

    async def update(self, request: Any, ctx: Any) -> pb.UpdateResponse:
        proc = self._select(request.process)
        if request.has_field("pty") and request.pty.size is not None:
            size = request.pty.size
            try:
                proc.resize(size.cols, size.rows)
            except (InputError, OSError) as exc:
                raise ConnectError(Code.INTERNAL, f"error resizing tty: {exc}") from exc
        return pb.UpdateResponse()

    async def send_input(self, request: Any, ctx: Any) -> pb.SendInputResponse:
        await _write(self._select(request.process), request.input)
        return pb.SendInputResponse()

    async def stream_input(self, requests: Any, ctx: Any) -> pb.StreamInputResponse:
        proc: ManagedProcess | None = None
        async for request in requests:
            event = request.event
            if event is None or event.field == "keepalive":
                continue
            if event.field == "start":
                proc = self._select(event.value.process)
            elif event.field == "data":
                if proc is None:
                    raise ConnectError(Code.FAILED_PRECONDITION, "input data before start event")
                await _write(proc, event.value.input)
        return pb.StreamInputResponse()

    async def send_signal(self, request: Any, ctx: Any) -> pb.SendSignalResponse:
        proc = self._select(request.process)
        signum = _SIGNALS.get(request.signal)
        if signum is None:
            raise ConnectError(Code.UNIMPLEMENTED, f"invalid signal: {request.signal}")
        proc.signal(signum)
        if signum == signal.SIGKILL:
            # A killed process is gone when the call returns: a List right after a kill
            # must not show it. SIGKILL cannot be ignored, so this is short; bounded anyway.
            await proc.wait_reaped(_KILL_REAP_S)
        return pb.SendSignalResponse()

    async def close_stdin(self, request: Any, ctx: Any) -> pb.CloseStdinResponse:
        proc = self._select(request.process)
        try:
            proc.close_stdin()
        except InputError as exc:
            raise ConnectError(Code.UNKNOWN, f"error closing stdin: {exc}") from exc
        return pb.CloseStdinResponse()
