"""The store under concurrent writers, on each engine: what SQLite's single writer gave
for free holds on PostgreSQL too (``store/sql/_dialect.py``): followers of the event log
by id miss nothing, bounds per team hold, a team or a key made twice at once is made
once, tags move to the latest build, the webhook cursor never goes back, and servers
starting together on one database migrate it once."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from postgres_cluster import Cluster

from bac_server.store import (
    BuildRecord,
    CapRecord,
    EventRecord,
    SandboxPin,
    TemplateRecord,
    TraceQuery,
    UploadRecord,
    WebhookRecord,
)
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore
from bac_server.store.sql.engine import open_engine
from bac_server.store.sql.migrations import LATEST, migrate

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SEALER = Sealer(Sealer.new_key())


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(database_url, SEALER)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_follower_of_the_event_log_misses_no_event(store: SqlStore) -> None:
    """Writers log events at once while a reader follows by id ("after the last id I
    saw"): the reader sees every event exactly once, in id order."""
    writers, rounds = 6, 20
    done = asyncio.Event()

    async def write(n: int) -> None:
        for i in range(rounds):
            await store.sandboxes.add_events([
                EventRecord(f"s{n}", "team", NOW, "process", f"{n}.{i}.{k}", "info", {})
                for k in range(2)])

    async def follow() -> list[int]:
        seen: list[int] = []
        while True:
            finished = done.is_set()
            page = await store.sandboxes.trace(TraceQuery(
                team_id="team", after_id=seen[-1] if seen else 0, limit=10_000))
            seen.extend(e.event_id or 0 for e in page)
            if finished:
                return seen
            await asyncio.sleep(0)  # a turn of the loop between reads, not a wait

    follower = asyncio.create_task(follow())
    await asyncio.gather(*(write(n) for n in range(writers)))
    done.set()
    seen = await follower
    everything = await store.sandboxes.trace(TraceQuery(team_id="team", limit=10_000))
    assert len(everything) == writers * rounds * 2
    assert seen == sorted(seen)
    assert seen == [e.event_id for e in everything]


async def test_a_team_asked_for_at_once_is_made_once(store: SqlStore) -> None:
    teams = await asyncio.gather(*(store.keys.ensure_team("acme") for _ in range(8)))
    assert {(t.team_id, t.created_at) for t in teams} == {(teams[0].team_id,
                                                          teams[0].created_at)}


async def test_bounds_per_team_hold_under_concurrent_inserts(store: SqlStore) -> None:
    """Ten webhooks and ten caps asked for at once under a bound of three: three each."""
    hooks = await asyncio.gather(*(store.webhooks.insert_webhook(WebhookRecord(
        f"wh{i}", "team", f"hook {i}", "https://example.com/", ("sandbox.lifecycle.created",),
        True, "secret", NOW, NOW), max_per_team=3) for i in range(10)))
    caps = await asyncio.gather(*(store.usage.insert_cap(CapRecord(
        f"cap{i}", "team", "team", "day", 1.0, "pause", NOW, NOW), max_per_team=3)
        for i in range(10)))
    assert hooks.count(True) == 3 and len(await store.webhooks.list_webhooks("team")) == 3
    assert caps.count(True) == 3 and len(await store.usage.list_caps("team")) == 3


async def test_builds_finishing_together_leave_each_tag_with_the_latest(
        store: SqlStore) -> None:
    await store.catalog.add_template(TemplateRecord(
        template_id="t1", team_id="team", name="app", public=False, created_at=NOW,
        updated_at=NOW))
    builds = [BuildRecord(build_id=f"b{i}", template_id="t1", team_id="team",
                          status="building", created_at=NOW + timedelta(seconds=i),
                          updated_at=NOW, tags=("default", "v1")) for i in range(6)]
    for build in builds:
        await store.builds.add_build(build)
    order = list(builds)
    random.Random(7).shuffle(order)
    await asyncio.gather(*(store.builds.finish_build(
        b.build_id, status="ready", at=NOW + timedelta(minutes=1), from_states=("building",),
        digest=f"d-{b.build_id}") for b in order))
    tags = {t.tag: t.build_id for t in await store.catalog.list_tags("t1")}
    assert tags == {"default": "b5", "v1": "b5"}
    template = await store.catalog.get_template("t1")
    assert template is not None and template.build_count == 6


async def test_the_webhook_cursor_only_moves_forward(store: SqlStore) -> None:
    cursors = list(range(1, 31))
    random.Random(3).shuffle(cursors)
    await asyncio.gather(*(store.webhooks.owe([], cursor) for cursor in cursors))
    assert await store.webhooks.cursor() == 30


async def test_the_same_upload_or_pin_written_at_once_is_one_row(store: SqlStore) -> None:
    await asyncio.gather(*(store.uploads.add_upload(UploadRecord(
        "team", "hash", f"/p{i}", i, NOW)) for i in range(6)))
    await asyncio.gather(*(store.catalog.pin_sandbox(SandboxPin("s1", "t1", f"b{i}", "d"))
                           for i in range(6)))
    assert len(await store.uploads.all_uploads()) == 1
    assert await store.catalog.sandbox_pin("s1") is not None


async def test_servers_starting_together_migrate_the_database_once(
        postgres: Cluster) -> None:
    """Two servers (two engines) on one empty PostgreSQL database (one process owns a
    SQLite file): both start, one of them applied every step and the other found them
    applied."""
    url = postgres.new_database()
    engines = [open_engine(url) for _ in range(2)]
    try:
        before = await asyncio.gather(*(migrate(e, SEALER) for e in engines))
        assert sorted(before) == [0, LATEST]
    finally:
        for engine in engines:
            await engine.dispose()


async def test_a_template_deleted_while_its_build_finishes_deadlocks_nothing(
        store: SqlStore) -> None:
    """Deleting a template and finishing its builds at once: each call ends (no
    deadlock for the database to break), and the template is gone."""
    await store.catalog.add_template(TemplateRecord(
        template_id="t1", team_id="team", name="app", public=False, created_at=NOW,
        updated_at=NOW))
    for i in range(4):
        await store.builds.add_build(BuildRecord(
            build_id=f"b{i}", template_id="t1", team_id="team", status="building",
            created_at=NOW + timedelta(seconds=i), updated_at=NOW, tags=("default",)))
    finishes = [store.builds.finish_build(f"b{i}", status="ready", at=NOW,
                                          from_states=("building",)) for i in range(4)]
    await asyncio.gather(*finishes[:2], store.catalog.delete_template("t1"), *finishes[2:])
    assert await store.catalog.get_template("t1") is None
    assert await store.catalog.list_tags("t1") == []
