"""One node agent, seen from an API replica: the backend contract over its HTTP routes.

A node that cannot be reached (refused, timed out, reset) raises ``NodeUnreachable``: the
caller learns that the node did not answer, not that the sandbox is gone. A node's error
answer raises the backend error it names (``_wire``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from bac_server.backends.base import (
    BackendError,
    BuildStep,
    CheckpointInfo,
    NodeUnreachable,
    OutputCallback,
    RelayedAnswer,
    ResourceUsage,
    SandboxEndpoint,
    SandboxSpec,
    SandboxStatus,
    TraceSink,
    VolumeBind,
)
from bac_server.backends.egress import EgressPolicy, NetworkUsage
from bac_server.store import NodeRecord

from . import _wire as wire
from ._tunnel import dial_tunnel

log = logging.getLogger(__name__)

# A create, a suspend or a restore may take long (a boot, CRIU writing memory); the
# others are quick. Connecting is always bounded tightly: a node down is seen at once.
_QUICK = httpx.Timeout(30.0, connect=3.0)
_LONG = httpx.Timeout(600.0, connect=3.0)


class RemoteNode:
    def __init__(self, record: NodeRecord, token: str) -> None:
        self.record = record
        self.node_id = record.node_id
        self._token = token
        self._client = httpx.AsyncClient(
            base_url=f"http://{_host(record.address)}:{record.rpc_port}",
            headers={"authorization": f"Bearer {token}"}, timeout=_QUICK,
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
        self._trace_task: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self._trace_task is not None:
            self._trace_task.cancel()
            await asyncio.gather(self._trace_task, return_exceptions=True)
        await self._client.aclose()

    async def _call(self, method: str, path: str, *, body: Any = None,
                    content: bytes | None = None, long: bool = False) -> Any:
        try:
            answer = await self._client.request(
                method, path, json=body if content is None else None, content=content,
                timeout=_LONG if long else _QUICK,
                headers={"content-type": "application/json"} if content is not None
                else None)
        except httpx.TransportError as exc:
            raise NodeUnreachable(f"node {self.node_id} did not answer: "
                                  f"{type(exc).__name__} {exc}") from exc
        try:
            parsed = answer.json() if answer.content else None
        except ValueError:
            parsed = None
        if answer.status_code >= 400:
            raise wire.error_of(parsed, answer.status_code)
        return parsed

    # -- the backend contract ------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> SandboxEndpoint:
        made = await self._call("POST", "/v1/sandboxes", content=wire.SPEC.dump_json(spec),
                                long=True)
        return wire.ENDPOINT.validate_python(made)

    async def destroy(self, sandbox_id: str) -> None:
        await self._call("DELETE", f"/v1/sandboxes/{sandbox_id}", long=True)

    async def status(self, sandbox_id: str) -> SandboxStatus:
        return SandboxStatus((await self._call("GET", f"/v1/sandboxes/{sandbox_id}/status"))
                             ["status"])

    async def endpoint(self, sandbox_id: str) -> SandboxEndpoint:
        return wire.ENDPOINT.validate_python(
            await self._call("GET", f"/v1/sandboxes/{sandbox_id}/endpoint"))

    async def list(self) -> list[str]:
        return [str(i) for i in await self._call("GET", "/v1/sandboxes")]

    async def usage(self, sandbox_id: str) -> ResourceUsage:
        return wire.USAGE.validate_python(
            await self._call("GET", f"/v1/sandboxes/{sandbox_id}/usage"))

    async def pause(self, sandbox_id: str) -> None:
        await self._call("POST", f"/v1/sandboxes/{sandbox_id}/pause", long=True)

    async def resume(self, sandbox_id: str) -> SandboxEndpoint:
        return wire.ENDPOINT.validate_python(
            await self._call("POST", f"/v1/sandboxes/{sandbox_id}/resume", long=True))

    async def pause_all(self, sandbox_ids: Sequence[str]) -> dict[str, str]:
        failed = await self._call("POST", "/v1/pause-all",
                                  body={"sandbox_ids": list(sandbox_ids)}, long=True)
        return {str(k): str(v) for k, v in failed.items()}

    async def set_network(self, sandbox_id: str, policy: EgressPolicy) -> None:
        await self._call("PUT", f"/v1/sandboxes/{sandbox_id}/network",
                         content=wire.POLICY.dump_json(policy))

    async def network_usage(self, sandbox_id: str) -> NetworkUsage:
        return wire.NETWORK_USAGE.validate_python(
            await self._call("GET", f"/v1/sandboxes/{sandbox_id}/network"))

    async def suspend(self, sandbox_id: str, *, memory: bool) -> int:
        done = await self._call("POST", f"/v1/sandboxes/{sandbox_id}/suspend",
                                body={"memory": memory}, long=True)
        return int(done["bytes"])

    async def wake(self, spec: SandboxSpec, *, memory: bool) -> SandboxEndpoint:
        return wire.ENDPOINT.validate_python(await self._call(
            "POST", "/v1/wake", long=True,
            body={"spec": wire.SPEC.dump_python(spec, mode="json"), "memory": memory}))

    async def layers_in_use(self) -> frozenset[Path]:
        return frozenset(Path(str(p)) for p in await self._call("GET", "/v1/layers",
                                                                 long=True))

    # -- volumes (VolumeHost, VolumeRelay) ------------------------------------------------

    async def make_volume(self, volume_id: str, size_mb: int) -> None:
        await self._call("POST", f"/v1/volumes/{volume_id}", body={"size_mb": size_mb},
                         long=True)

    async def volume_dir(self, volume_id: str) -> Path:
        return Path((await self._call("GET", f"/v1/volumes/{volume_id}", long=True))["path"])

    async def drop_volume(self, volume_id: str) -> None:
        await self._call("DELETE", f"/v1/volumes/{volume_id}", long=True)

    async def mount_volumes(self, sandbox_id: str, binds: Sequence[VolumeBind]) -> None:
        await self._call("POST", f"/v1/sandboxes/{sandbox_id}/volumes", long=True,
                         body=[{"volume_id": b.volume_id, "path": b.path} for b in binds])

    async def relay_volume(self, volume_id: str, method: str, path: str, query: str,
                           headers: Sequence[tuple[str, str]],
                           body: AsyncIterator[bytes]) -> RelayedAnswer:
        """The node's own volume content API (the node token replaces the volume's)."""
        sent = self._client.build_request(
            method, f"/v1/volumecontent/{volume_id}/{path}", params=httpx.QueryParams(query),
            headers=[(k, v) for k, v in headers if k.lower() != "authorization"],
            content=body if method in ("PUT", "POST", "PATCH") else None, timeout=_LONG)
        try:
            got = await self._client.send(sent, stream=True)
        except httpx.TransportError as exc:
            raise NodeUnreachable(f"node {self.node_id} did not answer: "
                                  f"{type(exc).__name__} {exc}") from exc
        kept = [(k, v) for k, v in got.headers.multi_items()
                if k.lower() in ("content-type", "content-length", "should-retry")]
        return RelayedAnswer(got.status_code, kept, got.aiter_raw(), got.aclose)

    async def take_over(self, spec: SandboxSpec, *, memory: bool = True) -> SandboxEndpoint:
        return wire.ENDPOINT.validate_python(await self._call(
            "POST", "/v1/take-over", long=True,
            body={"spec": wire.SPEC.dump_python(spec, mode="json"), "memory": memory}))

    async def checkpoint(self, sandbox_id: str, checkpoint_id: str, *,
                         memory: bool) -> CheckpointInfo:
        return wire.CHECKPOINT.validate_python(await self._call(
            "POST", f"/v1/sandboxes/{sandbox_id}/checkpoints", long=True,
            body={"checkpoint_id": checkpoint_id, "memory": memory}))

    async def restore(self, spec: SandboxSpec, checkpoint_id: str) -> SandboxEndpoint:
        return wire.ENDPOINT.validate_python(await self._call(
            "POST", "/v1/restore", long=True,
            body={"spec": wire.SPEC.dump_python(spec, mode="json"),
                  "checkpoint_id": checkpoint_id}))

    async def create_from(self, spec: SandboxSpec, checkpoint_id: str, *,
                          source_token: str | None) -> SandboxEndpoint:
        return wire.ENDPOINT.validate_python(await self._call(
            "POST", "/v1/create-from", long=True,
            body={"spec": wire.SPEC.dump_python(spec, mode="json"),
                  "checkpoint_id": checkpoint_id, "source_token": source_token}))

    async def delete_checkpoint(self, checkpoint_id: str) -> None:
        await self._call("DELETE", f"/v1/checkpoints/{checkpoint_id}", long=True)

    async def run_build_step(self, step: BuildStep, output: OutputCallback) -> int:
        try:
            async with self._client.stream(
                    "POST", "/v1/build-steps", content=wire.BUILD_STEP.dump_json(step),
                    headers={"content-type": "application/json"},
                    timeout=httpx.Timeout(step.timeout_s + 60, connect=3.0)) as answer:
                if answer.status_code != 200:
                    raise wire.error_of(json.loads(await answer.aread() or b"null"),
                                        answer.status_code)
                async for line in answer.aiter_lines():
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if "exit_code" in item:
                        return int(item["exit_code"])
                    if "error" in item:
                        raise wire.error_of(item["error"], 500)
                    output(str(item["stream"]), str(item["line"]))
        except httpx.TransportError as exc:
            raise NodeUnreachable(f"node {self.node_id} did not answer: "
                                  f"{type(exc).__name__} {exc}") from exc
        raise BackendError(f"node {self.node_id} ended the build step without its outcome")

    async def dial(self, sandbox_id: str, port: int) -> socket.socket:
        return await dial_tunnel(self.record.address, self.record.tunnel_port, self._token,
                                 sandbox_id, port)

    # -- the trace -------------------------------------------------------------------

    def follow_trace(self, sink: TraceSink) -> None:
        """Read the node's trace reports into ``sink`` until closed, reconnecting."""
        if self._trace_task is None:
            self._trace_task = asyncio.create_task(self._follow(sink))

    async def _follow(self, sink: TraceSink) -> None:
        pause = 0.5
        while True:
            try:
                async with self._client.stream("GET", "/v1/trace",
                                               timeout=httpx.Timeout(60.0, connect=3.0)
                                               ) as answer:
                    if answer.status_code != 200:
                        raise httpx.TransportError(f"status {answer.status_code}")
                    pause = 0.5
                    async for line in answer.aiter_lines():
                        if line.strip():
                            item = json.loads(line)
                            sink(str(item["sandbox_id"]), base64.b64decode(item["report"]))
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                log.debug("the trace of node %s paused: %s", self.node_id, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 5.0)


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
