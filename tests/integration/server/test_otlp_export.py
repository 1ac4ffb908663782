"""The trace exported over OTLP/HTTP: a real server (in this process) with real sandboxes
sends its spans to a real OTLP receiver on loopback, which decodes each request with the
OpenTelemetry protocol's own messages (``opentelemetry-proto``). Without an endpoint the
server loads nothing of the SDK; a receiver that fails or is down costs the server nothing.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from bac_process import free_port
from e2b import AsyncSandbox, CommandExitException
from inprocess_server import inprocess_server
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from bac_server.control.telemetry import SpanCounts, root_span_id_of, trace_id_of

pytestmark = [pytest.mark.root, pytest.mark.slow]

BOUND_S = 30.0
HERE = Path(__file__).parent


# -- a real OTLP/HTTP receiver -------------------------------------------------------------

@dataclass
class Received:
    span: Span
    resource: dict[str, Any]

    @property
    def attrs(self) -> dict[str, Any]:
        return {kv.key: _plain(kv.value) for kv in self.span.attributes}


def _plain(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_plain(v) for v in value.array_value.values)
    return getattr(value, which) if which else None


@dataclass
class OtlpReceiver:
    port: int
    status: int = 200
    spans: list[Received] = field(default_factory=list)
    requests: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: _plain(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                found += [Received(s, resource) for s in scope_spans.spans]
        with self.changed:
            self.requests += 1
            self.spans += found
            self.changed.notify_all()

    def wait(self, done: Callable[[list[Received]], bool], bound_s: float = BOUND_S
             ) -> list[Received]:
        """The spans received once ``done`` accepts them (waits, bounded)."""
        deadline = time.monotonic() + bound_s
        with self.changed:
            while not done(self.spans):
                left = deadline - time.monotonic()
                assert left > 0, f"not received in {bound_s} s: {[s.span.name for s in self.spans]}"
                self.changed.wait(left)
            return list(self.spans)


@contextmanager
def otlp_receiver(status: int = 200) -> Iterator[OtlpReceiver]:
    holder: list[OtlpReceiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver = holder[0]
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            assert self.path == "/v1/traces"
            assert self.headers["Content-Type"] == "application/x-protobuf"
            if receiver.status == 200:
                receiver.take(body)
                answer = ExportTraceServiceResponse().SerializeToString()
            else:
                with receiver.changed:
                    receiver.requests += 1
                    receiver.changed.notify_all()
                answer = b""
            self.send_response(receiver.status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(OtlpReceiver(int(server.server_address[1]), status))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _of(spans: list[Received], sandbox_id: str) -> list[Received]:
    trace_id = trace_id_of(sandbox_id).to_bytes(16, "big")
    return [s for s in spans if s.span.trace_id == trace_id]


def _named(spans: list[Received], name: str) -> list[Received]:
    return [s for s in spans if s.span.name == name]


# -- the tests -----------------------------------------------------------------------------

async def test_a_sandboxs_processes_and_transfers_arrive_as_one_trace() -> None:
    with otlp_receiver() as receiver:
        async with inprocess_server("otlp", otlp_endpoint=receiver.endpoint) as server:
            sbx = await AsyncSandbox.create(timeout=300, metadata={"run_id": "r-otlp"},
                                            **server.opts())
            sid = sbx.sandbox_id
            try:
                assert (await sbx.commands.run("echo hello")).stdout == "hello\n"
                with pytest.raises(CommandExitException):
                    await sbx.commands.run("exit 3")
                await sbx.files.write("/tmp/otlp.txt", "twelve bytes")
                assert await sbx.files.read("/tmp/otlp.txt") == "twelve bytes"

                def reported(spans: list[Received]) -> bool:
                    mine = _of(spans, sid)
                    return len(_named(mine, "process")) >= 2 \
                        and bool(_named(mine, "files.upload")) \
                        and bool(_named(mine, "files.download"))

                await asyncio.to_thread(receiver.wait, reported)
            finally:
                await sbx.kill()
            spans = await asyncio.to_thread(
                receiver.wait, lambda spans: bool(_named(_of(spans, sid), "sandbox")))
            export = server.plane.span_export
            assert export is not None
            # The batches before the root's were answered before it was sent (one thread
            # sends them in turn); the root's own answer may still be on its way back.
            async with httpx.AsyncClient(timeout=10) as client:
                scraped = (await client.get(server.metrics_url)).text
            [exported] = [line for line in scraped.splitlines()
                          if line.startswith('bac_otlp_spans_total{outcome="exported"}')]
            assert float(exported.split()[-1]) >= 1
        counts = export.counts()  # the server stopped: every answer is in
        assert counts.exported >= len(_of(spans, sid))
        assert (counts.failed, counts.dropped, counts.pending) == (0, 0, 0)

    mine = _of(spans, sid)
    root_id = root_span_id_of(sid).to_bytes(8, "big")
    [root] = _named(mine, "sandbox")
    assert root.span.span_id == root_id and root.span.parent_span_id == b""
    assert root.attrs["bac.sandbox.end"] == "killed"
    assert root.attrs["bac.sandbox.end_reason"] == "request"
    assert root.resource["service.name"] == "bac" and root.resource["host.name"]
    for span in mine:  # one trace, under one root, each carrying the sandbox and its run
        if span is not root:
            assert span.span.parent_span_id == root_id, span.span.name
        assert span.attrs["bac.sandbox.id"] == sid
        assert span.attrs["bac.metadata.run_id"] == "r-otlp"
        assert span.attrs["bac.template.id"] == "base"
        assert span.attrs["bac.team.id"]
        assert root.span.start_time_unix_nano <= span.span.start_time_unix_nano \
            <= span.span.end_time_unix_nano <= root.span.end_time_unix_nano, span.span.name
    names = {s.span.name for s in mine}
    assert {"sandbox.created", "sandbox.start", "process", "files.upload",
            "files.download", "sandbox"} <= names

    echo, failed = sorted(_named(mine, "process"), key=lambda s: s.span.start_time_unix_nano)
    assert echo.attrs["process.command_line"].endswith("echo hello")
    assert echo.attrs["process.exit.code"] == 0
    assert echo.attrs["bac.process.stdout_bytes"] == 6
    assert echo.attrs["process.owner"] == "user"
    assert echo.span.status.code == Status.STATUS_CODE_UNSET
    assert failed.attrs["process.exit.code"] == 3
    assert failed.span.status.code == Status.STATUS_CODE_ERROR
    assert echo.span.end_time_unix_nano <= failed.span.start_time_unix_nano
    took_ms = (echo.span.end_time_unix_nano - echo.span.start_time_unix_nano) / 1e6
    assert took_ms == pytest.approx(echo.attrs["bac.process.duration_ms"], abs=0.01)

    [upload] = _named(mine, "files.upload")
    [download] = _named(mine, "files.download")
    assert upload.attrs["bac.transfer.bytes"] == 12 == download.attrs["bac.transfer.bytes"]
    assert upload.attrs["bac.transfer.path"] == "/tmp/otlp.txt"
    assert upload.attrs["bac.transfer.ok"] is True
    assert failed.span.end_time_unix_nano <= upload.span.end_time_unix_nano \
        <= download.span.end_time_unix_nano


@pytest.mark.parametrize("receiver_state", ["answers 500", "down"])
async def test_a_failing_receiver_costs_the_server_nothing(receiver_state: str) -> None:
    with otlp_receiver(status=500) as receiver:
        endpoint = receiver.endpoint if receiver_state == "answers 500" \
            else f"http://127.0.0.1:{free_port()}/v1/traces"  # nothing listens there
        began = 0.0
        async with inprocess_server("otlp-fail", otlp_endpoint=endpoint,
                                    otlp_timeout_s=1.0) as server:
            sbx = await AsyncSandbox.create(timeout=300, **server.opts())
            try:
                for _ in range(3):
                    assert (await sbx.commands.run("echo still")).stdout == "still\n"
                async with httpx.AsyncClient(timeout=10) as client:
                    listed = await client.get(f"{server.url}/sandboxes",
                                              headers={"X-API-KEY": server.keys[0]})
                assert listed.status_code == 200
            finally:
                await sbx.kill()
            export = server.plane.span_export
            assert export is not None
            began = time.monotonic()
        # The stop sent what was queued, which failed: counted, not waited on for long.
        stopped_in = time.monotonic() - began
        counts: SpanCounts = export.counts()
        assert counts.exported == 0 and counts.failed > 0, counts
        assert stopped_in < 20, f"the server took {stopped_in:.1f} s to stop"
        if receiver_state == "answers 500":
            assert receiver.requests > 0 and not receiver.spans


_NO_ENDPOINT = """
import asyncio, json, sys
sys.path[:0] = [{here!r}, {compat!r}]
from e2b import AsyncSandbox, CommandExitException
from inprocess_server import inprocess_server
from bac_server.config import ServerConfig

async def main():
    endpoint = ServerConfig.from_env().otlp_endpoint
    async with inprocess_server("otlp-off", otlp_endpoint=endpoint) as server:
        sbx = await AsyncSandbox.create(timeout=300, **server.opts())
        await sbx.commands.run("true")
        await sbx.files.write("/tmp/f", "x")
        await sbx.kill()
        spans = server.plane.span_export
    print(json.dumps({{"endpoint": endpoint, "export": spans is not None, "modules": sorted(
        m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter",
                                                "bac_server.control.telemetry._otlp")))}}))

asyncio.run(main())
"""


def test_without_an_endpoint_nothing_is_loaded_or_sent() -> None:
    """BAC_OTLP_ENDPOINT=none wins over an OTEL_* endpoint set for something else."""
    with otlp_receiver() as receiver:
        env = dict(os.environ, BAC_OTLP_ENDPOINT="none",
                   OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}")
        script = _NO_ENDPOINT.format(here=str(HERE), compat=str(HERE.parents[1] / "compat"))
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=240, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        found = json.loads(done.stdout.strip().splitlines()[-1])
        assert found == {"endpoint": "", "export": False, "modules": []}
        assert receiver.requests == 0
