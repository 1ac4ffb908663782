"""The migration runner applies every step not yet recorded: a step numbered below one
already applied (the program gained it later) still runs, once, and a database whose
single version row was written by the older runner counts every step up to it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from bac_server.store.sealing import Sealer
from bac_server.store.sql import migrations
from bac_server.store.sql.engine import open_engine

SEALER = Sealer(Sealer.new_key())


async def _state(url: str) -> tuple[set[int], set[str], set[str], set[str]]:
    engine = open_engine(url)

    def read(conn: sa.Connection) -> tuple[set[int], set[str], set[str], set[str]]:
        inspector = sa.inspect(conn)
        versions = {int(v) for v in conn.execute(sa.text(
            "SELECT version FROM schema_version")).scalars()}
        columns = {c["name"] for c in inspector.get_columns("sandbox_events")}
        indexes = {i["name"] or "" for i in inspector.get_indexes("sandbox_events")}
        return versions, set(inspector.get_table_names()), columns, indexes

    async with engine.connect() as conn:
        found = await conn.run_sync(read)
    await engine.dispose()
    return found


async def test_a_lower_step_added_later_still_runs(empty_database_url: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A server without step 5 migrated to the latest; a later one with 5 applies it, and
    re-running changes nothing."""
    url = empty_database_url
    without_5 = tuple(s for s in migrations.STEPS if s.version != 5)
    monkeypatch.setattr(migrations, "STEPS", without_5)
    engine = open_engine(url)
    await migrations.migrate(engine, SEALER)
    await engine.dispose()
    versions, tables, columns, indexes = await _state(url)
    assert versions == {1, 2, 3, 4} | set(range(6, migrations.LATEST + 1))
    assert "webhooks" in tables and "wire_type" in columns and "metadata" not in columns
    assert "ix_sandbox_events_team" in indexes

    monkeypatch.undo()
    engine = open_engine(url)
    assert await migrations.migrate(engine, SEALER) == migrations.LATEST
    assert await migrations.migrate(engine, SEALER) == migrations.LATEST
    await engine.dispose()
    versions, _tables, columns, _indexes = await _state(url)
    assert versions == set(range(1, migrations.LATEST + 1))
    assert "metadata" in columns  # step 5's column


async def test_the_older_runners_single_row_counts_every_step_up_to_it(
        empty_database_url: str) -> None:
    url = empty_database_url
    engine = open_engine(url)
    async with engine.begin() as conn:
        for step in migrations.STEPS[:4]:
            await conn.run_sync(step.upgrade, SEALER)
        await conn.exec_driver_sql("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        await conn.exec_driver_sql("INSERT INTO schema_version VALUES (4)")
    assert await migrations.migrate(engine, SEALER) == 4
    await engine.dispose()
    versions, tables, columns, _indexes = await _state(url)
    # 1 to 3 not run again (they would fail on their tables).
    assert versions == set(range(4, migrations.LATEST + 1))
    assert "webhook_deliveries" in tables and {"wire_type", "metadata"} <= columns


async def test_step_6_gives_the_events_already_logged_their_types(empty_database_url: str) -> None:
    """Rows written before version 6 get their type: a timeout that paused (its fields
    name a pause mode) is a pause, one that did not a kill; kinds that are no events none."""
    url = empty_database_url
    engine = open_engine(url)
    async with engine.begin() as conn:
        for step in migrations.STEPS[:5]:
            await conn.run_sync(step.upgrade, SEALER)
        await conn.exec_driver_sql("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        await conn.exec_driver_sql("INSERT INTO schema_version VALUES (5)")
        for kind, fields in (("created", "{}"), ("timeout", '{"mode": "disk"}'),
                             ("timeout", "{}"), ("started", "{}"), ("snapshot_taken", "{}")):
            await conn.execute(sa.text(
                "INSERT INTO sandbox_events (sandbox_id, team_id, at, kind, level, message, "
                "fields) VALUES ('s', 't', 0, :kind, 'info', 'm', :fields)"),
                {"kind": kind, "fields": fields})
    await migrations.migrate(engine, SEALER)
    async with engine.connect() as conn:
        types = list((await conn.exec_driver_sql(
            "SELECT wire_type FROM sandbox_events ORDER BY event_id")).scalars())
    await engine.dispose()
    assert types == ["sandbox.lifecycle.created", "sandbox.lifecycle.paused",
                     "sandbox.lifecycle.killed", None, "sandbox.lifecycle.checkpointed"]
