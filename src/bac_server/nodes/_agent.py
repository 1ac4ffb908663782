"""The node agent (``bac node``): one machine's backend, served to the API replicas.

Every method of the backend contract (``backends.base``) is an HTTP/JSON route taking and
answering the contract's own records (``_wire``), each behind the node token; the tunnel
(``_tunnel``) carries traffic into the sandboxes; trace reports wait in a bounded buffer
until a replica reads them (``GET /v1/trace``, a stream of lines). The agent registers its
row in the store and beats (``NodeStore.beat``) so the replicas see it alive.

The agent never decides anything about a sandbox's life: what it is asked, it does to
its backend and answers; timers, limits and the trace's meaning stay with the replicas.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bac_server.backends.base import (
    Backend,
    Builder,
    Checkpointable,
    FleetPausable,
    LayerHolder,
    NetworkControl,
    Pausable,
    SandboxNotFound,
    SandboxStatus,
    TakesOver,
    Traced,
    VolumeBind,
    VolumeHost,
    VolumeMountFailed,
)
from bac_server.store import NodeRecord, NodeState, NodeStore

from . import _wire as wire
from ._tunnel import TunnelServer

log = logging.getLogger(__name__)

Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]

# Reports kept for a replica to read; past this the oldest are dropped (and counted).
TRACE_BUFFER = 20_000


@dataclass(frozen=True)
class NodeIdentity:
    node_id: str
    address: str  # where replicas reach it (advertised)
    rpc_port: int
    tunnel_port: int
    vcpus: int
    memory_mb: int
    version: str


class _TraceBuffer:
    def __init__(self, size: int = TRACE_BUFFER) -> None:
        self._items: collections.deque[tuple[str, bytes]] = collections.deque(maxlen=size)
        self._ready = asyncio.Event()
        self.dropped = 0

    def put(self, sandbox_id: str, data: bytes) -> None:
        if len(self._items) == self._items.maxlen:
            self.dropped += 1
        self._items.append((sandbox_id, data))
        self._ready.set()

    async def lines(self) -> AsyncIterator[bytes]:
        while True:
            if not self._items:
                self._ready.clear()
                try:
                    async with asyncio.timeout(15):
                        await self._ready.wait()
                except TimeoutError:
                    yield b"\n"  # keeps the stream's idle connection known alive
                    continue
            batch: list[str] = []
            while self._items and len(batch) < 256:
                sandbox_id, data = self._items.popleft()
                batch.append(json.dumps({"sandbox_id": sandbox_id,
                                         "report": base64.b64encode(data).decode()}))
            yield ("\n".join(batch) + "\n").encode()


class _Guard:
    """Every request must carry the node token; anything else is a 401 and nothing runs."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._token):
                await JSONResponse({"code": "unauthorized", "message": "bad node token"},
                                   status_code=401)(scope, receive, send)
                return
        await self._app(scope, receive, send)


class NodeAgent:
    def __init__(self, *, backend: Backend, identity: NodeIdentity, token: str,
                 node_store: NodeStore, heartbeat_s: float = 5.0) -> None:
        self.backend = backend
        self.identity = identity
        self._token = token
        self._nodes = node_store
        self._heartbeat_s = heartbeat_s
        self._trace = _TraceBuffer()
        self.tunnel = TunnelServer(token=token, resolve=self._address)
        self._beating: asyncio.Task[None] | None = None
        self.started_at = datetime.now(UTC)

    async def _address(self, sandbox_id: str) -> str:
        """The address of a sandbox running here; a paused one has none to the tunnel (a
        replica whose view is stale would otherwise wait on a frozen sandbox's port)."""
        try:
            if await self.backend.status(sandbox_id) is not SandboxStatus.RUNNING:
                raise LookupError(sandbox_id)
            return (await self.backend.endpoint(sandbox_id)).address
        except SandboxNotFound as exc:
            raise LookupError(sandbox_id) from exc

    # -- life ------------------------------------------------------------------------

    async def start(self, tunnel_host: str) -> None:
        """Listen on the tunnel, take the trace, register and start beating."""
        await self.tunnel.start(tunnel_host, self.identity.tunnel_port)
        if isinstance(self.backend, Traced):
            self.backend.trace_to(self._trace.put)
        await self._register()
        self._beating = asyncio.create_task(self._beat_forever())

    async def close(self) -> None:
        if self._beating is not None:
            self._beating.cancel()
            await asyncio.gather(self._beating, return_exceptions=True)
        if isinstance(self.backend, Traced):
            self.backend.trace_to(None)
        await self.tunnel.close()

    async def _register(self) -> None:
        i = self.identity
        now = datetime.now(UTC)
        await self._nodes.register_node(NodeRecord(
            node_id=i.node_id, address=i.address, rpc_port=i.rpc_port,
            tunnel_port=i.tunnel_port, vcpus=i.vcpus, memory_mb=i.memory_mb,
            state=NodeState.ACTIVE, heartbeat_at=now, started_at=self.started_at,
            version=i.version, sandboxes=len(await self.backend.list())))

    async def beat(self) -> None:
        """One heartbeat (registering again if its row is gone)."""
        held = len(await self.backend.list())
        before = await self._nodes.beat(self.identity.node_id, datetime.now(UTC), held)
        if before is None:
            await self._register()
        elif before is NodeState.LOST:
            log.warning("node %s was marked lost; beating again", self.identity.node_id)

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            try:
                await self.beat()
            except Exception:
                log.exception("the heartbeat failed; sandboxes keep running")

    # -- the routes ------------------------------------------------------------------

    def app(self, lifespan: Lifespan | None = None,
            served: Sequence[BaseRoute] = ()) -> ASGIApp:
        """The routes, behind the token; ``lifespan``: what runs around serving them (the
        agent's start and close, its backend's); ``served``: more routes (the volume
        content API, which the composition root builds on the API's handlers)."""
        def on(path: str, method: str,
               handler: Callable[[Request], Awaitable[Any]]) -> Route:
            async def endpoint(request: Request) -> Response:
                try:
                    answer = await handler(request)
                except Exception as exc:
                    status, body = wire.error_body(exc)
                    if status >= 500:
                        log.warning("%s %s failed: %s", method, request.url.path, exc)
                    return JSONResponse(body, status_code=status)
                if isinstance(answer, Response):
                    return answer
                return Response(json.dumps(answer), media_type="application/json")
            return Route(path, endpoint, methods=[method])

        b = self.backend
        routes: list[BaseRoute] = [
            on("/v1/node", "GET", self._info),
            on("/v1/sandboxes", "GET", lambda r: b.list()),
            on("/v1/sandboxes", "POST", self._create),
            on("/v1/sandboxes/{id}", "DELETE", lambda r: b.destroy(_id(r))),
            on("/v1/sandboxes/{id}/status", "GET", self._status),
            on("/v1/sandboxes/{id}/endpoint", "GET", self._endpoint),
            on("/v1/sandboxes/{id}/usage", "GET", self._usage),
            on("/v1/trace", "GET", self._trace_stream),
        ]
        if isinstance(b, Pausable):
            routes += [on("/v1/sandboxes/{id}/pause", "POST", self._pause),
                       on("/v1/sandboxes/{id}/resume", "POST", self._resume)]
        if isinstance(b, Builder):
            routes.append(on("/v1/build-steps", "POST", self._build_step))
        if isinstance(b, FleetPausable):
            routes.append(on("/v1/pause-all", "POST", self._pause_all))
        if isinstance(b, NetworkControl):
            routes += [on("/v1/sandboxes/{id}/network", "PUT", self._set_network),
                       on("/v1/sandboxes/{id}/network", "GET", self._network_usage)]
        if isinstance(b, Checkpointable):
            routes += [on("/v1/sandboxes/{id}/suspend", "POST", self._suspend),
                       on("/v1/wake", "POST", self._wake),
                       on("/v1/sandboxes/{id}/checkpoints", "POST", self._checkpoint),
                       on("/v1/restore", "POST", self._restore),
                       on("/v1/create-from", "POST", self._create_from),
                       on("/v1/checkpoints/{cid}", "DELETE", self._delete_checkpoint)]
        if isinstance(b, LayerHolder):
            routes.append(on("/v1/layers", "GET", self._layers))
        if isinstance(b, TakesOver):
            routes.append(on("/v1/take-over", "POST", self._take_over))
        if isinstance(b, VolumeHost):
            routes += [on("/v1/volumes/{vid}", "POST", self._make_volume),
                       on("/v1/volumes/{vid}", "GET", self._volume_dir),
                       on("/v1/volumes/{vid}", "DELETE", self._drop_volume),
                       on("/v1/sandboxes/{id}/volumes", "POST", self._mount_volumes)]
        routes += served
        return _Guard(Starlette(routes=routes, lifespan=lifespan), self._token)

    async def _info(self, request: Request) -> dict[str, Any]:
        b = self.backend
        return {"node_id": self.identity.node_id, "version": self.identity.version,
                "backend": b.name, "trace_dropped": self._trace.dropped,
                "memory_checkpoints": isinstance(b, Checkpointable) and b.memory_checkpoints}

    async def _create(self, request: Request) -> Any:
        spec = wire.SPEC.validate_json(await request.body())
        made = await self.backend.create(spec)
        return wire.ENDPOINT.dump_python(made, mode="json")

    async def _status(self, request: Request) -> Any:
        status: SandboxStatus = await self.backend.status(_id(request))
        return {"status": status.value}

    async def _endpoint(self, request: Request) -> Any:
        return wire.ENDPOINT.dump_python(await self.backend.endpoint(_id(request)),
                                         mode="json")

    async def _usage(self, request: Request) -> Any:
        return wire.USAGE.dump_python(await self.backend.usage(_id(request)), mode="json")

    async def _pause(self, request: Request) -> Any:
        assert isinstance(self.backend, Pausable)
        await self.backend.pause(_id(request))
        return None

    async def _resume(self, request: Request) -> Any:
        assert isinstance(self.backend, Pausable)
        return wire.ENDPOINT.dump_python(await self.backend.resume(_id(request)),
                                         mode="json")

    async def _pause_all(self, request: Request) -> Any:
        assert isinstance(self.backend, FleetPausable)
        ids = [str(i) for i in (await request.json())["sandbox_ids"]]
        return await self.backend.pause_all(ids)

    async def _set_network(self, request: Request) -> Any:
        assert isinstance(self.backend, NetworkControl)
        policy = wire.POLICY.validate_json(await request.body())
        await self.backend.set_network(_id(request), policy)
        return None

    async def _network_usage(self, request: Request) -> Any:
        assert isinstance(self.backend, NetworkControl)
        return wire.NETWORK_USAGE.dump_python(
            await self.backend.network_usage(_id(request)), mode="json")

    async def _suspend(self, request: Request) -> Any:
        assert isinstance(self.backend, Checkpointable)
        memory = bool((await request.json())["memory"])
        return {"bytes": await self.backend.suspend(_id(request), memory=memory)}

    async def _wake(self, request: Request) -> Any:
        assert isinstance(self.backend, Checkpointable)
        body = await request.json()
        spec = wire.SPEC.validate_python(body["spec"])
        made = await self.backend.wake(spec, memory=bool(body["memory"]))
        return wire.ENDPOINT.dump_python(made, mode="json")

    async def _checkpoint(self, request: Request) -> Any:
        assert isinstance(self.backend, Checkpointable)
        body = await request.json()
        info = await self.backend.checkpoint(_id(request), str(body["checkpoint_id"]),
                                             memory=bool(body["memory"]))
        return wire.CHECKPOINT.dump_python(info, mode="json")

    async def _restore(self, request: Request) -> Any:
        assert isinstance(self.backend, Checkpointable)
        body = await request.json()
        made = await self.backend.restore(wire.SPEC.validate_python(body["spec"]),
                                          str(body["checkpoint_id"]))
        return wire.ENDPOINT.dump_python(made, mode="json")

    async def _layers(self, request: Request) -> Any:
        assert isinstance(self.backend, LayerHolder)
        return sorted(str(p) for p in await self.backend.layers_in_use())

    async def _make_volume(self, request: Request) -> Any:
        assert isinstance(self.backend, VolumeHost)
        body = await request.json()
        await self.backend.make_volume(_vid(request), int(body["size_mb"]))
        return {}

    async def _volume_dir(self, request: Request) -> Any:
        assert isinstance(self.backend, VolumeHost)
        return {"path": str(await self.backend.volume_dir(_vid(request)))}

    async def _drop_volume(self, request: Request) -> Any:
        assert isinstance(self.backend, VolumeHost)
        await self.backend.drop_volume(_vid(request))
        return {}

    async def _mount_volumes(self, request: Request) -> Any:
        assert isinstance(self.backend, VolumeHost)
        binds = [VolumeBind(str(b["volume_id"]), str(b["path"]))
                 for b in await request.json()]
        await self.backend.mount_volumes(_id(request), binds)
        return {}

    async def _take_over(self, request: Request) -> Any:
        assert isinstance(self.backend, TakesOver)
        body = await request.json()
        made = await self.backend.take_over(wire.SPEC.validate_python(body["spec"]),
                                            memory=bool(body["memory"]))
        return wire.ENDPOINT.dump_python(made, mode="json")

    async def _create_from(self, request: Request) -> Any:
        assert isinstance(self.backend, Checkpointable)
        body = await request.json()
        token = body.get("source_token")
        made = await self.backend.create_from(
            wire.SPEC.validate_python(body["spec"]), str(body["checkpoint_id"]),
            source_token=None if token is None else str(token))
        return wire.ENDPOINT.dump_python(made, mode="json")

    async def _delete_checkpoint(self, request: Request) -> Any:
        assert isinstance(self.backend, Checkpointable)
        await self.backend.delete_checkpoint(str(request.path_params["cid"]))
        return None

    async def _build_step(self, request: Request) -> Response:
        """A stream of lines: ``{"stream", "line"}`` as the step prints them, then
        ``{"exit_code"}`` or ``{"error": {"code", "message"}}``. The caller going away
        cancels the step (its command killed, as ``Builder`` says)."""
        builder = self.backend
        assert isinstance(builder, Builder)
        step = wire.BUILD_STEP.validate_json(await request.body())
        lines: asyncio.Queue[bytes | None] = asyncio.Queue()

        def output(stream: str, line: str) -> None:
            lines.put_nowait(json.dumps({"stream": stream, "line": line}).encode() + b"\n")

        async def run() -> None:
            try:
                code = await builder.run_build_step(step, output)
                lines.put_nowait(json.dumps({"exit_code": code}).encode() + b"\n")
            except Exception as exc:
                _, body = wire.error_body(exc)
                lines.put_nowait(json.dumps({"error": body}).encode() + b"\n")
            finally:
                lines.put_nowait(None)

        async def stream() -> AsyncIterator[bytes]:
            task = asyncio.create_task(run())
            try:
                while (item := await lines.get()) is not None:
                    yield item
            finally:
                if not task.done():
                    task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        return StreamingResponse(stream(), media_type="application/x-ndjson")

    async def _trace_stream(self, request: Request) -> Response:
        return StreamingResponse(self._trace.lines(), media_type="application/x-ndjson")


def _id(request: Request) -> str:
    return str(request.path_params["id"])


def _vid(request: Request) -> str:
    volume_id = str(request.path_params["vid"])
    if not volume_id.isalnum():
        raise VolumeMountFailed(f"invalid volume id {volume_id[:64]!r}")
    return volume_id


