"""The SQL store on each engine (a SQLite file, a PostgreSQL database): migrations and
every Store method."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from bac_server.store import (
    ApiKeyRecord,
    BuildLogRecord,
    EventRecord,
    MetricRecord,
    SandboxRecord,
    StoreConflict,
    TraceQuery,
)
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore, schema
from bac_server.store.sql.engine import open_engine
from bac_server.store.sql.migrations import LATEST, MigrationError, migrate

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

SEALER = Sealer(Sealer.new_key())  # one key for every store a test reopens


def _sandbox(sandbox_id: str = "abc", state: str = "running") -> SandboxRecord:
    return SandboxRecord(
        sandbox_id=sandbox_id, team_id="team", template_id="base", alias="b", state=state,
        started_at=NOW, end_at=NOW + timedelta(minutes=5), cpu_count=2, memory_mb=512,
        disk_mb=1024, envd_access_token="tok", traffic_access_token=None,
        metadata={"k": "v"}, env_vars={"A": "1"}, network={"allowPublicTraffic": True},
        allow_internet_access=True,
    )


def _event(sandbox_id: str = "abc", kind: str = "created", at: datetime = NOW) -> EventRecord:
    return EventRecord(sandbox_id, "team", at, kind, f"{kind} happened", "info", {"k": kind})


async def test_fresh_database_matches_the_declared_schema(empty_database_url: str) -> None:
    """Migrating an empty database yields exactly the tables and columns schema.py declares."""
    engine = open_engine(empty_database_url)
    assert await migrate(engine, SEALER) == 0

    def columns(conn: sa.Connection) -> dict[str, set[str]]:
        inspector = sa.inspect(conn)
        return {
            t: {c["name"] for c in inspector.get_columns(t)}
            for t in inspector.get_table_names() if t != "schema_version"
        }

    async with engine.connect() as conn:
        found = await conn.run_sync(columns)
        if engine.dialect.name == "sqlite":
            assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
    await engine.dispose()
    declared = {t.name: {c.name for c in t.columns} for t in schema.metadata.sorted_tables}
    assert found == declared


async def test_migrate_twice_is_a_no_op(empty_database_url: str) -> None:
    """A second start finds the schema current and changes nothing."""
    engine = open_engine(empty_database_url)
    await migrate(engine, SEALER)
    assert await migrate(engine, SEALER) == LATEST
    await engine.dispose()


async def test_newer_database_is_refused(empty_database_url: str) -> None:
    """A database written by a newer server is not touched by an older one."""
    engine = open_engine(empty_database_url)
    await migrate(engine, SEALER)
    async with engine.begin() as conn:
        await conn.exec_driver_sql(f"UPDATE schema_version SET version = {LATEST + 1}")
    with pytest.raises(MigrationError, match="newer"):
        await migrate(engine, SEALER)
    await engine.dispose()


async def test_sandbox_rows_round_trip_and_update(database_url: str) -> None:
    """A sandbox row comes back equal; updates change state/end and append events."""
    store = await SqlStore.open(database_url, SEALER)
    await store.keys.ensure_team("team")
    await store.sandboxes.insert_sandbox(_sandbox(), _event())
    assert await store.sandboxes.get_sandbox("abc") == _sandbox()
    with pytest.raises(StoreConflict):
        await store.sandboxes.insert_sandbox(_sandbox(), _event())
    later = NOW + timedelta(hours=1)
    await store.sandboxes.update_sandbox("abc", state="killed", end_at=later, ended_at=later,
                                         event=_event(kind="killed", at=later))
    row = await store.sandboxes.get_sandbox("abc")
    assert row is not None and (row.state, row.end_at, row.ended_at) == ("killed", later, later)
    assert await store.sandboxes.sandboxes_in_states(["running"]) == []
    logged = await store.sandboxes.events("abc", since=None, limit=10, newest_first=False)
    kinds = [e.kind for e in logged]
    assert kinds == ["created", "killed"]
    newest = await store.sandboxes.events("abc", since=None, limit=1, newest_first=True)
    assert [e.kind for e in newest] == ["killed"]
    # Read back with the id the store gave it and the sandbox's metadata copied in.
    assert await store.sandboxes.events("abc", since=later, limit=10, newest_first=False) == [
        dataclasses.replace(_event(kind="killed", at=later), event_id=2, metadata={"k": "v"})
    ]
    await store.close()


async def test_state_survives_reopening(database_url: str) -> None:
    """What one store instance committed, the next (after a restart) reads."""
    store = await SqlStore.open(database_url, SEALER)
    await store.keys.ensure_team("team")
    await store.sandboxes.insert_sandbox(_sandbox("one"), _event("one"))
    await store.close()
    again = await SqlStore.open(database_url, SEALER)
    assert [s.sandbox_id for s in await again.sandboxes.sandboxes_in_states(["running"])] == ["one"]
    await again.close()


async def test_metrics_range_and_prune(database_url: str) -> None:
    """Samples are returned oldest first within [start, end]; pruning drops old ones."""
    store = await SqlStore.open(database_url, SEALER)
    samples = [
        MetricRecord("abc", NOW + timedelta(seconds=i), 2, 1.5 * i, i, 100, 0, 10, 1000)
        for i in range(5)
    ]
    await store.metrics.add_metrics(samples)
    assert await store.metrics.metrics("abc", None, None) == samples
    window = await store.metrics.metrics("abc", NOW + timedelta(seconds=1),
                                         NOW + timedelta(seconds=3))
    assert window == samples[1:4]
    assert await store.metrics.prune_metrics(NOW + timedelta(seconds=2)) == 2
    assert await store.metrics.metrics("abc", None, None) == samples[2:]
    await store.close()


async def test_api_keys_by_hash_and_revocation(database_url: str) -> None:
    """Keys are added once, found by hash, listed with their team, and revoked by id or
    prefix."""
    store = await SqlStore.open(database_url, SEALER)
    team = await store.keys.ensure_team("acme")
    assert (await store.keys.ensure_team("acme")).team_id == team.team_id
    key = ApiKeyRecord("id1", team.team_id, "ci", "h" * 64, "e2b_abcd", NOW)
    await store.keys.add_api_key(key)
    with pytest.raises(StoreConflict):
        await store.keys.add_api_key(key)
    assert await store.keys.find_api_key("h" * 64) == key
    assert await store.keys.find_api_key("x" * 64) is None
    listed = await store.keys.list_api_keys()
    assert [(k.key_id, t.name) for k, t in listed] == [("id1", "acme")]
    assert await store.keys.revoke_api_key("e2b_abcd", NOW) == 1
    assert await store.keys.revoke_api_key("id1", NOW) == 0
    found = await store.keys.find_api_key("h" * 64)
    assert found is not None and found.revoked_at == NOW
    await store.close()


async def test_event_ids_count_past_32_bits(database_url: str) -> None:
    """The event log's ids go on past 2³¹ (PostgreSQL's SERIAL stopped there before
    migration 10), and a cursor that far is a valid query on either engine."""
    store = await SqlStore.open(database_url, SEALER)
    far = 2**31 + 5
    engine = open_engine(database_url)
    async with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            await conn.exec_driver_sql(
                f"SELECT setval(pg_get_serial_sequence('sandbox_events', 'event_id'), {far})")
        else:  # the rowid goes on from the largest one
            await conn.execute(sa.insert(schema.sandbox_events).values(
                event_id=far, sandbox_id="abc", team_id="team", at=0.0, kind="old",
                level="info", message="", fields={}))
    await engine.dispose()
    await store.sandboxes.add_event(_event())
    [event] = await store.sandboxes.events("abc", since=NOW, limit=10, newest_first=False)
    assert event.event_id == far + 1
    assert await store.sandboxes.trace(TraceQuery(team_id="team", after_id=far + 1)) == []
    assert await store.event_log.events_for_delivery(
        team_ids=["team"], types=["x"], after_id=2**40, limit=10) == []
    await store.webhooks.owe([], far + 1)
    assert await store.webhooks.cursor() == far + 1
    await store.close()


async def test_nul_in_free_text_is_kept_alike_on_each_engine(database_url: str) -> None:
    """A build's output or an event's message with a NUL character (binary output) is
    logged on PostgreSQL, whose text cannot hold NUL, as on SQLite: NUL made U+FFFD."""
    store = await SqlStore.open(database_url, SEALER)
    await store.sandboxes.add_event(EventRecord("abc", "team", NOW, "process", "a\x00b",
                                                "info", {"cmd": "x\x00y"}))
    [event] = await store.sandboxes.events("abc", since=None, limit=1, newest_first=False)
    assert (event.message, event.fields) == ("a\ufffdb", {"cmd": "x\x00y"})
    await store.builds.add_build_logs([BuildLogRecord("b1", 1, NOW, "info", "out\x00put")])
    [line] = await store.builds.build_logs("b1", limit=10)
    assert line.message == "out\ufffdput"
    await store.close()
