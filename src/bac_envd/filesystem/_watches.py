"""The watches of the filesystem service: the ``WatchDir`` stream (async SDK) and the
polled watchers (sync SDK), which live between calls.

A stream starts with ``{"start":{}}`` once the watch is in place, then sends events and
keepalives until the client leaves or its ``Connect-Timeout-Ms`` passes. Polled watchers
keep at most ``MAX_QUEUED`` undelivered events (the oldest are dropped beyond that); a
stream whose client falls that far behind ends with ``resource_exhausted``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Literal

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from protobuf import Oneof

from bac_envd._errors import os_error_text
from bac_envd._rpcctx import deadline_seconds, keepalive_seconds, rpc_path, rpc_user
from bac_envd._state import EnvdState
from bac_envd.filesystem._convert import to_entry_info
from bac_envd.filesystem._entry import entry_info
from bac_envd.filesystem._errors import FsError
from bac_envd.filesystem._mounts import is_network_mount
from bac_envd.filesystem._watcher import DirWatcher, FsEvent, FsEventType
from bac_protocol.envd import filesystem_pb as pb

if TYPE_CHECKING:
    from connectrpc.request import RequestContext

    from bac_envd._rpcctx import Context

MAX_QUEUED = 65536
_Start = Oneof[Literal["start"], pb.WatchDirResponse.StartEvent]
_Fs = Oneof[Literal["filesystem"], pb.FilesystemEvent]
_Keep = Oneof[Literal["keepalive"], pb.WatchDirResponse.KeepAlive]
_WITH_ENTRY = (FsEventType.CREATE, FsEventType.WRITE, FsEventType.CHMOD)


def _to_wire(event: FsEvent, include_entry: bool) -> pb.FilesystemEvent:
    entry = None
    if include_entry and event.type in _WITH_ENTRY:
        try:
            entry = to_entry_info(entry_info(event.path))
        except FsError:
            entry = None  # gone again already
    return pb.FilesystemEvent(name=event.name, type=pb.EventType(event.type.value), entry=entry)


class _Polled:
    def __init__(self, include_entry: bool) -> None:
        self.include_entry = include_entry
        self.events: deque[pb.FilesystemEvent] = deque(maxlen=MAX_QUEUED)
        self.watcher: DirWatcher | None = None

    def sink(self, event: FsEvent) -> None:
        self.events.append(_to_wire(event, self.include_entry))


class Watches:
    """The RPCs' watch logic and the polled watchers, owned by ``FilesystemService``."""

    def __init__(self, state: EnvdState) -> None:
        self._state = state
        self._polled: dict[str, _Polled] = {}

    def _open(self, request: pb.WatchDirRequest | pb.CreateWatcherRequest,
              ctx: Context, sink: Callable[[FsEvent], None]) -> DirWatcher:
        path = rpc_path(request.path, rpc_user(ctx, self._state), self._state)
        try:
            os.stat(path)
        except FileNotFoundError as exc:
            raise ConnectError(Code.NOT_FOUND, f"path {path} not found") from exc
        except OSError as exc:
            text = os_error_text(exc)
            raise ConnectError(Code.INTERNAL, f"error statting path {path}: {text}") from exc
        if not os.path.isdir(path):
            raise ConnectError(Code.INVALID_ARGUMENT, f"path {path} not a directory")
        if not request.allow_network_mounts and is_network_mount(path):
            raise ConnectError(
                Code.INVALID_ARGUMENT, f"cannot watch path on network filesystem: {path}"
            )
        try:
            return DirWatcher(path, request.recursive, sink)
        except OSError as exc:
            message = f"error adding path {path} to watcher: {os_error_text(exc)}"
            raise ConnectError(Code.INTERNAL, message) from exc

    async def stream(
        self, request: pb.WatchDirRequest,
        ctx: RequestContext[pb.WatchDirRequest, pb.WatchDirResponse],
    ) -> AsyncIterator[pb.WatchDirResponse]:
        queue: deque[FsEvent] = deque()
        wake = asyncio.Event()

        def sink(event: FsEvent) -> None:
            if len(queue) <= MAX_QUEUED:  # beyond that the stream ends, see below
                queue.append(event)
            wake.set()

        watcher = self._open(request, ctx, sink)
        keepalive = keepalive_seconds(ctx)
        deadline = deadline_seconds(ctx)
        ends_at = None if deadline is None else time.monotonic() + deadline
        try:
            start: _Start = Oneof("start", pb.WatchDirResponse.StartEvent())
            yield pb.WatchDirResponse(event=start)
            while True:
                if len(queue) > MAX_QUEUED:
                    raise ConnectError(Code.RESOURCE_EXHAUSTED, "watch event queue overflow")
                while queue:
                    wire = _to_wire(queue.popleft(), request.include_entry)
                    event: _Fs = Oneof("filesystem", wire)
                    yield pb.WatchDirResponse(event=event)
                wait = keepalive
                if ends_at is not None:
                    wait = min(wait, ends_at - time.monotonic())
                    if wait <= 0:
                        raise ConnectError(Code.DEADLINE_EXCEEDED, "deadline exceeded")
                wake.clear()
                try:
                    await asyncio.wait_for(wake.wait(), wait)
                except TimeoutError:
                    if ends_at is None or time.monotonic() < ends_at:
                        keep: _Keep = Oneof("keepalive", pb.WatchDirResponse.KeepAlive())
                        yield pb.WatchDirResponse(event=keep)
        finally:
            watcher.close()

    def create(
        self, request: pb.CreateWatcherRequest,
        ctx: RequestContext[pb.CreateWatcherRequest, pb.CreateWatcherResponse],
    ) -> pb.CreateWatcherResponse:
        polled = _Polled(request.include_entry)
        polled.watcher = self._open(request, ctx, polled.sink)
        watcher_id = os.urandom(12).hex()
        self._polled[watcher_id] = polled
        return pb.CreateWatcherResponse(watcher_id=watcher_id)

    def _polled_by_id(self, watcher_id: str) -> _Polled:
        polled = self._polled.get(watcher_id)
        if polled is None:
            raise ConnectError(Code.NOT_FOUND, f"watcher with id {watcher_id} not found")
        return polled

    def drain(self, request: pb.GetWatcherEventsRequest) -> pb.GetWatcherEventsResponse:
        polled = self._polled_by_id(request.watcher_id)
        events = list(polled.events)
        polled.events.clear()
        return pb.GetWatcherEventsResponse(events=events)

    def remove(self, request: pb.RemoveWatcherRequest) -> pb.RemoveWatcherResponse:
        polled = self._polled_by_id(request.watcher_id)
        del self._polled[request.watcher_id]
        if polled.watcher is not None:
            polled.watcher.close()
        return pb.RemoveWatcherResponse()

    def close_all(self) -> None:
        for polled in self._polled.values():
            if polled.watcher is not None:
                polled.watcher.close()
        self._polled.clear()
