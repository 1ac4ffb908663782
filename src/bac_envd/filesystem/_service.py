"""The ``filesystem.Filesystem`` Connect service: Stat, MakeDir, Move, ListDir, Remove, and
the watch RPCs (their logic and the polled watchers are ``_watches``).

Transport only: resolve the user and paths, call ``_ops``, map ``FsError`` to Connect
codes, convert ``Entry`` to ``EntryInfo``. Tree-walking calls run in a worker thread so a
large directory does not stall other requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from bac_envd._rpcctx import rpc_path, rpc_user
from bac_envd._state import EnvdState
from bac_envd.filesystem import _ops
from bac_envd.filesystem._convert import to_connect, to_entry_info
from bac_envd.filesystem._entry import entry_info
from bac_envd.filesystem._errors import FsError
from bac_envd.filesystem._watches import Watches
from bac_protocol.envd import filesystem_pb as pb
from bac_protocol.envd.filesystem_connect import Filesystem

if TYPE_CHECKING:
    from connectrpc.request import RequestContext


class FilesystemService(Filesystem):
    def __init__(self, state: EnvdState) -> None:
        self._state = state
        self._watches = Watches(state)

    async def stat(
        self, request: pb.StatRequest, ctx: RequestContext[pb.StatRequest, pb.StatResponse]
    ) -> pb.StatResponse:
        path = rpc_path(request.path, rpc_user(ctx, self._state), self._state)
        try:
            return pb.StatResponse(entry=to_entry_info(entry_info(path)))
        except FsError as exc:
            raise to_connect(exc) from exc

    async def make_dir(
        self, request: pb.MakeDirRequest, ctx: RequestContext[pb.MakeDirRequest, pb.MakeDirResponse]
    ) -> pb.MakeDirResponse:
        user = rpc_user(ctx, self._state)
        path = rpc_path(request.path, user, self._state)
        try:
            return pb.MakeDirResponse(entry=to_entry_info(_ops.make_dir(path, user)))
        except FsError as exc:
            raise to_connect(exc) from exc

    async def move(
        self, request: pb.MoveRequest, ctx: RequestContext[pb.MoveRequest, pb.MoveResponse]
    ) -> pb.MoveResponse:
        user = rpc_user(ctx, self._state)
        source = rpc_path(request.source, user, self._state)
        destination = rpc_path(request.destination, user, self._state)
        try:
            entry = await asyncio.to_thread(_ops.move, source, destination, user)
        except FsError as exc:
            raise to_connect(exc) from exc
        return pb.MoveResponse(entry=to_entry_info(entry))

    async def list_dir(
        self, request: pb.ListDirRequest, ctx: RequestContext[pb.ListDirRequest, pb.ListDirResponse]
    ) -> pb.ListDirResponse:
        path = rpc_path(request.path, rpc_user(ctx, self._state), self._state)
        try:
            entries = await asyncio.to_thread(_ops.list_dir, path, request.depth)
        except FsError as exc:
            raise to_connect(exc) from exc
        return pb.ListDirResponse(entries=[to_entry_info(e) for e in entries])

    async def remove(
        self, request: pb.RemoveRequest, ctx: RequestContext[pb.RemoveRequest, pb.RemoveResponse]
    ) -> pb.RemoveResponse:
        path = rpc_path(request.path, rpc_user(ctx, self._state), self._state)
        try:
            await asyncio.to_thread(_ops.remove, path)
        except FsError as exc:
            raise to_connect(exc) from exc
        return pb.RemoveResponse()

    def watch_dir(
        self, request: pb.WatchDirRequest,
        ctx: RequestContext[pb.WatchDirRequest, pb.WatchDirResponse],
    ) -> AsyncIterator[pb.WatchDirResponse]:
        return self._watches.stream(request, ctx)

    async def create_watcher(
        self, request: pb.CreateWatcherRequest,
        ctx: RequestContext[pb.CreateWatcherRequest, pb.CreateWatcherResponse],
    ) -> pb.CreateWatcherResponse:
        return self._watches.create(request, ctx)

    async def get_watcher_events(
        self, request: pb.GetWatcherEventsRequest,
        ctx: RequestContext[pb.GetWatcherEventsRequest, pb.GetWatcherEventsResponse],
    ) -> pb.GetWatcherEventsResponse:
        return self._watches.drain(request)

    async def remove_watcher(
        self, request: pb.RemoveWatcherRequest,
        ctx: RequestContext[pb.RemoveWatcherRequest, pb.RemoveWatcherResponse],
    ) -> pb.RemoveWatcherResponse:
        return self._watches.remove(request)

    def close_all(self) -> None:
        """End every polled watcher (envd is exiting)."""
        self._watches.close_all()
