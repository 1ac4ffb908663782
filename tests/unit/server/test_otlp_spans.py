"""The trace's OTLP export without sandboxes: where the endpoint comes from, what each
event becomes as a span, the events a real store hands its listener, and the export's
bounded queue (drops counted, a dead receiver's spans counted as failed at the stop)."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bac_server.config import ConfigError, ServerConfig, otlp_endpoint_of
from bac_server.control import Registry
from bac_server.control.sandboxes import EventKind, LiveSandbox, SandboxState, event
from bac_server.control.telemetry import (
    OtlpSettings,
    SandboxSpans,
    otlp_export,
    root_span_id_of,
    trace_id_of,
)
from bac_server.store import EventRecord, SandboxRecord
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
NS = 1_000_000_000


def _ns(at: datetime) -> int:
    return int((at - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * NS


def _record(kind: EventKind, at: datetime, level: str = "info", sandbox_id: str = "sbx1",
            **fields: object) -> EventRecord:
    return EventRecord(sandbox_id, "team", at, kind.value, f"{kind.value} happened", level,
                       {"kind": kind.value, **fields}, metadata={"run_id": "r1"})


@pytest.mark.parametrize(("env", "endpoint"), [
    ({}, ""),
    ({"BAC_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces"),
    ({"BAC_OTLP_ENDPOINT": "http://c:4318/", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://o:4318"},
     "http://c:4318/v1/traces"),
    ({"BAC_OTLP_ENDPOINT": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://o:4318"}, ""),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t/x",
      "OTEL_EXPORTER_OTLP_ENDPOINT": "http://o:4318"}, "https://t/x"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://o:4318"}, "http://o:4318/v1/traces"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://o:4318", "OTEL_SDK_DISABLED": "true"}, ""),
])
def test_the_endpoint_follows_opentelemetrys_conventions(env: dict[str, str],
                                                         endpoint: str) -> None:
    assert otlp_endpoint_of(env) == endpoint
    assert ServerConfig.from_env(env).otlp_endpoint == endpoint


def test_an_endpoint_that_is_not_an_http_url_stops_the_server() -> None:
    with pytest.raises(ConfigError, match="OTLP endpoint"):
        ServerConfig.from_env({"BAC_OTLP_ENDPOINT": "collector:4318"})


def test_ids_are_the_sandboxs_own_and_never_zero() -> None:
    assert trace_id_of("sbx1") == trace_id_of("sbx1") != trace_id_of("sbx2")
    assert 0 < trace_id_of("sbx1") < 1 << 128 and 0 < root_span_id_of("sbx1") < 1 << 64


def test_a_sandboxs_life_maps_to_children_under_one_root() -> None:
    spans = SandboxSpans()
    later = NOW + timedelta(seconds=10)
    mapped = spans.spans([
        _record(EventKind.CREATED, NOW, template="base"),
        _record(EventKind.STARTED, NOW + timedelta(milliseconds=40), how="boot",
                total_ms="40.0"),
        _record(EventKind.PROCESS, later, pid=7, cmd="sleep 1", user="user",
                started_at=_ns(NOW + timedelta(seconds=1)) / NS, duration_ms=1000.0,
                signal=9, timed_out=True),
        _record(EventKind.TIMEOUT, later, mode="disk", duration_ms="250.0"),
        _record(EventKind.OOM_KILL, later, "error", count="1"),
        _record(EventKind.NETWORK, later, bytes_out=10, bytes_in=20, interval_s=30.0),
        _record(EventKind.KILLED, later + timedelta(seconds=1), reason="request"),
    ])
    by_name = {s.name: s for s in mapped}
    root = by_name["sandbox"]
    assert (root.span_id, root.parent_id) == (root_span_id_of("sbx1"), None)
    assert (root.start_ns, root.end_ns) == (_ns(NOW), _ns(later) + NS)
    assert root.attributes["bac.sandbox.end_reason"] == "request" and root.error is None
    for span in mapped:
        assert span.trace_id == trace_id_of("sbx1")
        assert span.attributes["bac.metadata.run_id"] == "r1"
        assert span.attributes["bac.template.id"] == "base"
        if span is not root:
            assert span.parent_id == root.span_id
    start = by_name["sandbox.start"]
    assert start.end_ns - start.start_ns == 40_000_000
    process = by_name["process"]
    assert (process.start_ns, process.end_ns) == (_ns(NOW) + NS, _ns(NOW) + 2 * NS)
    assert process.error == "killed by signal 9 (its timeout)"
    assert process.attributes["process.command_line"] == "sleep 1"
    assert process.attributes["bac.process.signal"] == 9
    pause = by_name["sandbox.pause"]  # a timeout that paused (autoPause)
    assert pause.end_ns - pause.start_ns == 250_000_000
    assert pause.attributes["bac.event.mode"] == "disk"
    assert by_name["sandbox.oom_kill"].error == "oom_kill happened"
    network = by_name["sandbox.network"]
    # Its 30 s interval reaches before the create: a child never starts before its root.
    assert (network.start_ns, network.end_ns) == (_ns(NOW), _ns(later))
    assert network.attributes["bac.event.bytes_out"] == 10


def test_a_sandbox_seen_first_at_its_end_still_gets_its_root() -> None:
    """Re-attached after a restart: the registry gives its template and start."""
    registry = Registry()
    sbx = LiveSandbox.from_record(SandboxRecord(
        sandbox_id="sbx1", team_id="team", template_id="code-interpreter", alias=None,
        state="running", started_at=NOW, end_at=NOW + timedelta(hours=1), cpu_count=2,
        memory_mb=512, disk_mb=1024, envd_access_token="t", traffic_access_token=None))
    sbx.state = SandboxState.RUNNING
    registry.add(sbx)
    spans = SandboxSpans(registry)
    [reattached] = spans.spans([_record(EventKind.REATTACHED, NOW + timedelta(minutes=5))])
    assert reattached.name == "sandbox.reattached"
    assert reattached.attributes["bac.template.id"] == "code-interpreter"
    registry.remove("sbx1")
    [root] = spans.spans([_record(EventKind.DIED, NOW + timedelta(minutes=9))])
    assert root.start_ns == _ns(NOW) and root.error == "died happened"
    [orphan] = SandboxSpans().spans([_record(EventKind.KILLED, NOW, sandbox_id="gone")])
    assert orphan.start_ns == orphan.end_ns == _ns(NOW)  # its start is not known


async def test_the_store_tells_its_listener_what_it_wrote(tmp_path: Path) -> None:
    heard: list[EventRecord] = []
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}",
                                Sealer(Sealer.new_key()), on_logged=heard.extend)
    try:
        await store.keys.ensure_team("team")
        record = SandboxRecord(
            sandbox_id="sbx1", team_id="team", template_id="base", alias=None,
            state="running", started_at=NOW, end_at=NOW, cpu_count=1, memory_mb=64,
            disk_mb=64, envd_access_token="t", traffic_access_token=None,
            metadata={"run_id": "r1"})
        created = event("sbx1", "team", EventKind.CREATED, "created")
        await store.sandboxes.insert_sandbox(record, created)
        await store.sandboxes.add_events([event("sbx1", "team", EventKind.CONNECTED, "c")])
        await store.sandboxes.update_sandbox(
            "sbx1", state="killed", event=event("sbx1", "team", EventKind.KILLED, "k"))
        await store.sandboxes.update_sandbox("sbx1", state="killed")  # no event: no call
    finally:
        await store.close()
    assert [e.kind for e in heard] == ["created", "connected", "killed"]
    assert all(e.metadata == {"run_id": "r1"} for e in heard)  # as written, not as given


async def test_a_full_queue_drops_and_a_dead_receiver_fails_counted() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    export = otlp_export(OtlpSettings(endpoint=f"http://127.0.0.1:{port}/v1/traces",
                                      timeout_s=0.5, queue_size=3, schedule_s=60.0))
    export.logged([_record(EventKind.CONNECTED, NOW)])  # before the start: ignored
    export.start()
    export.logged([_record(EventKind.CONNECTED, NOW + timedelta(seconds=i)) for i in range(5)])
    counts = export.counts()
    assert (counts.pending, counts.dropped, counts.exported) == (3, 2, 0)
    await export.close()
    counts = export.counts()
    assert (counts.failed, counts.pending, counts.exported) == (3, 0, 0)
    export.logged([_record(EventKind.CONNECTED, NOW)])  # after the stop: ignored
    assert export.counts() == counts
