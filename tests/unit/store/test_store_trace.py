"""The event log as a trace, on each engine: metadata copied into each event, the
trace query (sandbox, run, kinds, time, cursor), retention with an injected clock, the
migration that adds the column, and the intake's checks on reports from inside."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from bac_server.control import History, Registry, Traces, TraceSettings
from bac_server.control.sandboxes import LiveSandbox
from bac_server.control.sandboxes._trace import BadReport, Changes, TraceIntake, parse_report
from bac_server.store import EventRecord, SandboxRecord, TraceQuery
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore
from bac_server.store.sql.engine import open_engine
from bac_server.store.sql.migrations import STEPS, migrate

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SEALER = Sealer(Sealer.new_key())


def _sandbox(sandbox_id: str, metadata: dict[str, str], team: str = "team") -> SandboxRecord:
    return SandboxRecord(
        sandbox_id=sandbox_id, team_id=team, template_id="base", alias=None, state="running",
        started_at=NOW, end_at=NOW + timedelta(minutes=5), cpu_count=2, memory_mb=512,
        disk_mb=1024, envd_access_token="tok", traffic_access_token=None, metadata=metadata)


def _event(sandbox_id: str, kind: str, at: datetime = NOW, team: str = "team") -> EventRecord:
    return EventRecord(sandbox_id, team, at, kind, f"{kind} happened", "info", {"kind": kind})


async def test_each_event_carries_its_sandboxs_metadata_and_a_run_reads_as_one(
        database_url: str) -> None:
    store = await SqlStore.open(database_url, SEALER)
    try:
        await store.keys.ensure_team("team")
        await store.keys.ensure_team("other")
        sandboxes = store.sandboxes
        await sandboxes.insert_sandbox(_sandbox("a", {"run_id": "r1", "step": "1"}),
                                       _event("a", "created"))
        await sandboxes.insert_sandbox(_sandbox("b", {"run_id": "r1", "step": "2"}),
                                       _event("b", "created"))
        await sandboxes.insert_sandbox(_sandbox("c", {"run_id": "r2"}), _event("c", "created"))
        await sandboxes.insert_sandbox(_sandbox("x", {"run_id": "r1"}, team="other"),
                                       _event("x", "created", team="other"))
        await sandboxes.update_sandbox("a", state="paused", event=_event("a", "paused"))
        await sandboxes.add_events([_event("a", "process", NOW + timedelta(seconds=1)),
                                    _event("b", "process", NOW + timedelta(seconds=2)),
                                    _event("c", "transfer")])
        run = await sandboxes.trace(TraceQuery(team_id="team", metadata={"run_id": "r1"}))
        assert [(e.sandbox_id, e.kind) for e in run] == [
            ("a", "created"), ("b", "created"), ("a", "paused"), ("a", "process"),
            ("b", "process")]
        assert all(e.metadata["run_id"] == "r1" for e in run)
        ids = [e.event_id for e in run]
        assert ids == sorted(ids) and None not in ids
        step = await sandboxes.trace(TraceQuery(team_id="team",
                                                metadata={"run_id": "r1", "step": "2"}))
        assert {e.sandbox_id for e in step} == {"b"}
        processes = await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="a",
                                                     kinds=frozenset({"process"})))
        assert [e.kind for e in processes] == ["process"]
        later = await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="a",
                                                 since=NOW + timedelta(seconds=1)))
        assert [e.kind for e in later] == ["process"]
        before = await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="a",
                                                  until=NOW + timedelta(seconds=1)))
        assert [e.kind for e in before] == ["created", "paused"]
        page = await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="a", limit=1))
        rest = await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="a",
                                                after_id=page[-1].event_id or 0))
        assert [e.kind for e in page + rest] == ["created", "paused", "process"]
        # Another team's sandbox with the same run id is not in the run.
        assert await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="x")) == []
    finally:
        await store.close()


async def test_retention_by_age_and_by_count_with_an_injected_clock(database_url: str) -> None:
    store = await SqlStore.open(database_url, SEALER)
    try:
        await store.keys.ensure_team("team")
        sandboxes = store.sandboxes
        await sandboxes.insert_sandbox(_sandbox("a", {}), _event("a", "created"))
        await sandboxes.add_events([_event("a", "process", NOW + timedelta(days=6, seconds=n))
                                    for n in range(5)])
        clock = [NOW + timedelta(days=6, hours=12)]
        registry = Registry()
        traces = Traces(sandbox_store=sandboxes, registry=registry,
                        history=History(sandbox_store=sandboxes, metric_store=store.metrics,
                                        registry=registry),
                        settings=TraceSettings(retention_days=7, keep_per_sandbox=3),
                        now=lambda: clock[0])
        # Nothing is older than 7 days yet; the count bound keeps the newest 3 processes,
        # and never counts the lifecycle.
        assert await traces.prune() == 2
        left = await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="a"))
        assert [e.kind for e in left] == ["created", "process", "process", "process"]
        assert [e.at for e in left[1:]] == [NOW + timedelta(days=6, seconds=n)
                                           for n in (2, 3, 4)]
        clock[0] = NOW + timedelta(days=7, hours=1)  # the created event is 7 days old now
        assert await traces.prune() == 1
        left = await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="a"))
        assert [e.kind for e in left] == ["process"] * 3
        clock[0] = NOW + timedelta(days=14)
        assert await traces.prune() == 3
        assert await sandboxes.trace(TraceQuery(team_id="team", sandbox_id="a")) == []
    finally:
        await store.close()


async def test_migration_5_fills_the_metadata_of_events_already_there(
        empty_database_url: str) -> None:
    engine = open_engine(empty_database_url)
    version = sa.table("schema_version", sa.column("version", sa.Integer))
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            for step in STEPS:
                if step.version < 5:
                    await conn.run_sync(step.upgrade, SEALER)
                    await conn.execute(sa.insert(version).values(version=step.version))
            await conn.exec_driver_sql(
                "INSERT INTO teams (team_id, name, created_at) VALUES ('t', 't', 0)")
            await conn.exec_driver_sql(
                "INSERT INTO sandboxes (sandbox_id, team_id, template_id, state, started_at, "
                "end_at, cpu_count, memory_mb, disk_mb, envd_access_token, metadata, "
                "env_vars) VALUES ('old', 't', 'base', 'killed', 0, 0, 1, 1, 1, 'x', "
                "'{\"run_id\": \"r0\"}', '{}')")
            await conn.exec_driver_sql(
                "INSERT INTO sandbox_events (sandbox_id, team_id, at, kind, level, message, "
                "fields) VALUES ('old', 't', 0, 'created', 'info', 'made', '{}')")
        await migrate(engine, SEALER)
        async with engine.connect() as conn:
            meta = (await conn.exec_driver_sql(
                "SELECT metadata FROM sandbox_events WHERE sandbox_id = 'old'")).scalar()
        # SQLite hands JSON back as text, asyncpg decoded.
        assert (json.loads(meta) if isinstance(meta, str) else meta) == {"run_id": "r0"}
    finally:
        await engine.dispose()


# -- reports from inside: garbage is counted and dropped ------------------------------------

_GOOD = {"kind": "process", "pid": 7, "cmd": "ls", "user": "user", "cwd": "/", "pty": False,
         "duration_ms": 1.5, "stdout_bytes": 3, "stderr_bytes": 0, "exit_code": 0,
         "timed_out": False, "client_left": False}


@pytest.mark.parametrize("data, reason", [
    (b"\xff\xfe", "not JSON"),
    (b"[]", "not an object"),
    (b"{" * 100, "not JSON"),
    (b"x" * 20_000, "too large"),
    (json.dumps({"kind": "shell"}).encode(), "unknown kind"),
    (json.dumps({"kind": "process", "pid": 1}).encode(), "a required field is missing"),
    (json.dumps({**_GOOD, "pid": "7"}).encode(), "a count is not a non-negative integer"),
    (json.dumps({**_GOOD, "stdout_bytes": -1}).encode(),
     "a count is not a non-negative integer"),
    (json.dumps({**_GOOD, "duration_ms": True}).encode(),
     "a duration or time is not a non-negative number"),
    (json.dumps({**_GOOD, "signal": 9}).encode(),
     "a process ends with an exit code or a signal"),
    (json.dumps({"kind": "transfer", "direction": "sideways", "bytes": 1}).encode(),
     "a transfer is an upload or a download"),
])
def test_bad_reports_are_refused_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(BadReport, match=f"^{reason}$"):
        parse_report(data, 16 * 1024)


def test_a_good_report_keeps_known_fields_only_and_clips_text() -> None:
    kind, level, message, fields = parse_report(json.dumps(
        {**_GOOD, "cmd": "x" * 5000, "sandbox_id": "someone-else", "team_id": "t2"}).encode(),
        16 * 1024)
    assert kind.value == "process" and level == "info"
    assert "sandbox_id" not in fields and "team_id" not in fields
    assert len(fields["cmd"]) == 1024 and "exited 0" in message


class _NoStore:
    async def add_events(self, events: list[EventRecord]) -> None:  # pragma: no cover
        raise AssertionError("not written in this test")


def test_the_intake_rate_limits_each_sandbox_and_attributes_by_channel() -> None:
    registry = Registry()
    for sandbox_id in ("a", "b"):
        registry.add(LiveSandbox.from_record(_sandbox(sandbox_id, {"run": sandbox_id})))
    now = [100.0]
    intake = TraceIntake(sandbox_store=_NoStore(),  # type: ignore[arg-type]
                         registry=registry, changes=Changes(),
                         settings=TraceSettings(rate_per_s=10, burst=5),
                         monotonic=lambda: now[0])
    good = json.dumps(_GOOD).encode()
    for _ in range(8):
        intake.receive("a", good)
    assert intake.accepted == 5 and intake.dropped["rate"] == 3
    intake.receive("b", good)  # another sandbox has its own bucket
    now[0] += 0.2  # two tokens back at 10 per second
    for _ in range(3):
        intake.receive("a", good)
    assert intake.accepted == 8 and intake.dropped["rate"] == 4
    intake.receive("gone", good)
    intake.receive("b", b"garbage")
    assert intake.dropped["no sandbox"] == 1 and intake.dropped["not JSON"] == 1
    queued = intake._queue
    assert [e.sandbox_id for e in queued].count("b") == 1
    assert all(e.metadata == {"run": e.sandbox_id} for e in queued)
    assert all(e.team_id == "team" for e in queued)
