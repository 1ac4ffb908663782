"""The ``process.Process`` Connect service: transport parsing and error mapping only.

Start/Connect streams send ``start{pid}`` first, then data and keepalives, then exactly
one ``end``. Input, signals and PTY resizes reach running processes only; a retained
exited process answers not_found (so the SDK's kill() returns False for it, as with E2B
envd). Errors keep E2B envd's codes: unknown pid/tag ⇒ ``not_found``, bad cwd or exec
failure ⇒ ``invalid_argument``, bad signal ⇒ ``unimplemented``, input problems ⇒
``internal``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Literal, TypeVar

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from protobuf import Oneof

from bac_envd._errors import os_error_text
from bac_envd._http import client_gone
from bac_envd._rpcctx import deadline_seconds, keepalive_seconds, rpc_path, rpc_user
from bac_envd._state import EnvdState
from bac_envd.process._env import BadEnvironment, build_env
from bac_envd.process._exit import ExitInfo
from bac_envd.process._login import keep_login_path
from bac_envd.process._managed import DataChunk, InputError, ManagedProcess, ProcessSpec, ProcState
from bac_envd.process._spawn import SpawnError, SpawnRequest, spawn
from bac_envd.process._table import ProcessNotFound, ProcessTable
from bac_protocol.envd import process_pb as pb
from bac_protocol.envd.process_connect import Process

if TYPE_CHECKING:
    from connectrpc.request import RequestContext

_Wrapped = TypeVar("_Wrapped", pb.StartResponse, pb.ConnectResponse)
_Start = Oneof[Literal["start"], pb.ProcessEvent.StartEvent]
_Data = Oneof[Literal["data"], pb.ProcessEvent.DataEvent]
_End = Oneof[Literal["end"], pb.ProcessEvent.EndEvent]
_Keep = Oneof[Literal["keepalive"], pb.ProcessEvent.KeepAlive]
_SIGNALS = {pb.Signal.SIGKILL: signal.SIGKILL, pb.Signal.SIGTERM: signal.SIGTERM}
_KILL_REAP_S = 2.0


async def _write(proc: ManagedProcess, process_input: pb.ProcessInput | None) -> None:
    choice = process_input.input if process_input is not None else None
    if choice is None or choice.field not in ("stdin", "pty"):
        raise ConnectError(Code.UNIMPLEMENTED, "invalid input type")
    try:
        await proc.write_input(choice.value, pty=choice.field == "pty")
    except InputError as exc:
        target = "tty" if choice.field == "pty" else "stdin"
        raise ConnectError(Code.INTERNAL, f"error writing to {target}: {exc}") from exc


def _event(event: _Start | _Data | _End | _Keep) -> pb.ProcessEvent:
    return pb.ProcessEvent(event=event)


def _end(info: ExitInfo) -> pb.ProcessEvent:
    end = pb.ProcessEvent.EndEvent(
        exit_code=info.exit_code, exited=info.exited, status=info.status, error=info.error
    )
    choice: _End = Oneof("end", end)
    return _event(choice)


def _data(chunk: DataChunk) -> pb.ProcessEvent.DataEvent:
    if chunk.stream == "pty":
        pty: Oneof[Literal["pty"], bytes] = Oneof("pty", chunk.data)
        return pb.ProcessEvent.DataEvent(output=pty)
    if chunk.stream == "stderr":
        err: Oneof[Literal["stderr"], bytes] = Oneof("stderr", chunk.data)
        return pb.ProcessEvent.DataEvent(output=err)
    out: Oneof[Literal["stdout"], bytes] = Oneof("stdout", chunk.data)
    return pb.ProcessEvent.DataEvent(output=out)


async def _stream(
    proc: ManagedProcess,
    keepalive: float,
    deadline: float | None,
    wrap: Callable[[pb.ProcessEvent], _Wrapped],
) -> AsyncGenerator[_Wrapped, None]:
    # Subscribing happens on the first iteration, in the same step as the spawn that
    # precedes it (no await in between), so no output can slip past unseen.
    sub = proc.subscribe()
    ends_at = None if deadline is None else time.monotonic() + deadline
    try:
        started: _Start = Oneof("start", pb.ProcessEvent.StartEvent(pid=proc.pid))
        yield wrap(_event(started))
        while True:
            wait = keepalive
            if ends_at is not None:
                left = ends_at - time.monotonic()
                if left <= 0:
                    raise ConnectError(Code.DEADLINE_EXCEEDED, "deadline exceeded")
                wait = min(wait, left)
            item = await sub.next(wait)
            if item is None:
                if ends_at is None or time.monotonic() < ends_at:
                    keep: _Keep = Oneof("keepalive", pb.ProcessEvent.KeepAlive())
                    yield wrap(_event(keep))
            elif isinstance(item, DataChunk):
                data: _Data = Oneof("data", _data(item))
                yield wrap(_event(data))
            else:
                yield wrap(_end(item))
                return
    finally:
        sub.close()


class ProcessService(Process):
    def __init__(self, state: EnvdState, table: ProcessTable) -> None:
        self._state = state
        self._table = table

    def _select(self, selector: pb.ProcessSelector | None, *, live: bool = True
                ) -> ManagedProcess:
        choice = selector.selector if selector is not None else None
        try:
            if choice is not None and choice.field == "pid" and isinstance(choice.value, int):
                proc = self._table.by_pid(choice.value)
            elif choice is not None and choice.field == "tag" and isinstance(choice.value, str):
                proc = self._table.by_tag(choice.value)
            else:
                raise ConnectError(Code.INVALID_ARGUMENT, "process selector is required")
        except ProcessNotFound as exc:
            raise ConnectError(Code.NOT_FOUND, str(exc)) from exc
        if live and proc.state is not ProcState.RUNNING:
            what = f"pid {proc.pid}" if choice.field == "pid" else f"tag {choice.value}"
            raise ConnectError(Code.NOT_FOUND, f"process with {what} not found")
        return proc

    async def update(
        self, request: pb.UpdateRequest, ctx: RequestContext[pb.UpdateRequest, pb.UpdateResponse]
    ) -> pb.UpdateResponse:
        proc = self._select(request.process)
        if request.pty is not None and request.pty.size is not None:
            size = request.pty.size
            try:
                proc.resize(size.cols, size.rows)
            except (InputError, OSError) as exc:
                text = os_error_text(exc)
                raise ConnectError(Code.INTERNAL, f"error resizing tty: {text}") from exc
        return pb.UpdateResponse()

    async def send_input(
        self, request: pb.SendInputRequest,
        ctx: RequestContext[pb.SendInputRequest, pb.SendInputResponse],
    ) -> pb.SendInputResponse:
        await _write(self._select(request.process), request.input)
        return pb.SendInputResponse()

    async def stream_input(
        self, requests: AsyncIterator[pb.StreamInputRequest],
        ctx: RequestContext[pb.StreamInputRequest, pb.StreamInputResponse],
    ) -> pb.StreamInputResponse:
        proc: ManagedProcess | None = None
        async for request in requests:
            event = request.event
            if event is None:
                continue
            if isinstance(event.value, pb.StreamInputRequest.StartEvent):
                proc = self._select(event.value.process)
            elif isinstance(event.value, pb.StreamInputRequest.DataEvent):
                if proc is None:
                    raise ConnectError(Code.FAILED_PRECONDITION, "input data before start event")
                await _write(proc, event.value.input)
        return pb.StreamInputResponse()

    async def send_signal(
        self, request: pb.SendSignalRequest,
        ctx: RequestContext[pb.SendSignalRequest, pb.SendSignalResponse],
    ) -> pb.SendSignalResponse:
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

    async def close_stdin(
        self, request: pb.CloseStdinRequest,
        ctx: RequestContext[pb.CloseStdinRequest, pb.CloseStdinResponse],
    ) -> pb.CloseStdinResponse:
        proc = self._select(request.process)
        try:
            proc.close_stdin()
        except InputError as exc:
            raise ConnectError(Code.UNKNOWN, f"error closing stdin: {exc}") from exc
        return pb.CloseStdinResponse()

    async def list(
        self, request: pb.ListRequest, ctx: RequestContext[pb.ListRequest, pb.ListResponse]
    ) -> pb.ListResponse:
        infos = [
            pb.ProcessInfo(
                config=pb.ProcessConfig(
                    cmd=p.spec.cmd, args=list(p.spec.args), envs=p.spec.envs, cwd=p.spec.cwd
                ),
                pid=p.pid,
                tag=p.spec.tag,
            )
            for p in self._table.running()
        ]
        return pb.ListResponse(processes=infos)

    async def start(
        self, request: pb.StartRequest, ctx: RequestContext[pb.StartRequest, pb.StartResponse]
    ) -> AsyncIterator[pb.StartResponse]:
        user = rpc_user(ctx, self._state)
        config = request.process or pb.ProcessConfig()
        cwd_requested = config.cwd if config.has_field("cwd") else None
        cwd = rpc_path(cwd_requested or "", user, self._state)
        pty_size = None
        if request.pty is not None:
            size = request.pty.size or pb.PTY.Size()
            pty_size = (size.cols or 80, size.rows or 24)
        try:
            envs = dict(config.envs)
            env = build_env(user, self._state.env_vars, envs)
            keep_login_path(env, config.args, "PATH" in self._state.env_vars or "PATH" in envs)
            spawned = spawn(
                SpawnRequest(
                    argv=[config.cmd, *config.args],
                    env=env,
                    cwd=cwd,
                    user=user,
                    pty_size=pty_size,
                    stdin=request.stdin if request.has_field("stdin") else True,
                )
            )
        except (SpawnError, BadEnvironment) as exc:
            raise ConnectError(Code.INVALID_ARGUMENT, str(exc)) from exc
        tag = request.tag if request.has_field("tag") else None
        spec = ProcessSpec(config.cmd, tuple(config.args), dict(config.envs), cwd_requested, tag)
        proc = ManagedProcess(spawned, spec, user=user.name, cwd=cwd)
        proc.client_gone = client_gone.get()
        self._table.add(proc)
        lifetime = deadline_seconds(ctx)
        if lifetime is not None:
            proc.set_lifetime(lifetime)
        # The process lifetime already bounds this stream; no separate stream deadline.
        events = _stream(proc, keepalive_seconds(ctx), None, lambda e: pb.StartResponse(event=e))
        try:
            async with aclosing(events):
                async for message in events:
                    yield message
        finally:
            # Gone before the end (disconnected, cancelled): the process's report says so.
            if proc.state is ProcState.RUNNING:
                proc.client_left = True

    async def connect(
        self, request: pb.ConnectRequest,
        ctx: RequestContext[pb.ConnectRequest, pb.ConnectResponse],
    ) -> AsyncIterator[pb.ConnectResponse]:
        proc = self._select(request.process, live=False)
        wrap = lambda e: pb.ConnectResponse(event=e)  # noqa: E731
        events = _stream(proc, keepalive_seconds(ctx), deadline_seconds(ctx), wrap)
        async with aclosing(events):
            async for message in events:
                yield message
