"""The SQL store's templates, builds, build logs, tags, uploads and pins on each engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from bac_server.store import (
    BuildLogRecord,
    BuildRecord,
    SandboxPin,
    StoreConflict,
    TemplateRecord,
    UploadRecord,
)
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

SEALER = Sealer(Sealer.new_key())  # one key for every store a test reopens


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(database_url, SEALER)
    try:
        yield opened
    finally:
        await opened.close()


def _template(template_id: str, *, team: str = "alpha", name: str = "app",
              public: bool = False) -> TemplateRecord:
    return TemplateRecord(template_id=template_id, team_id=team, name=name, public=public,
                          created_at=NOW, updated_at=NOW)


def _build(build_id: str, *, at: datetime = NOW, tags: tuple[str, ...] = ("default",),
           cpu: int | None = None) -> BuildRecord:
    return BuildRecord(build_id=build_id, template_id="t1", team_id="alpha", status="waiting",
                       created_at=at, updated_at=at, tags=tags, cpu_count=cpu)


async def test_names_are_unique_per_team_and_visibility(store: SqlStore) -> None:
    """A team cannot have two templates of one name, another team can; a team sees its own
    templates and the public ones only."""
    await store.catalog.add_template(_template("t1"))
    with pytest.raises(StoreConflict):
        await store.catalog.add_template(_template("t2"))
    await store.catalog.add_template(_template("t3", team="beta"))
    await store.catalog.add_template(_template("t4", team="beta", name="shared", public=True))
    assert [t.template_id for t in await store.catalog.visible_templates("alpha")] == ["t1", "t4"]
    assert await store.catalog.update_template("t1", at=NOW, public=True)
    beta = await store.catalog.visible_templates("beta")
    assert [t.template_id for t in beta] == ["t1", "t3", "t4"]


async def test_later_build_keeps_the_tag_when_an_earlier_one_ends_after_it(
        store: SqlStore) -> None:
    """Tags go to a build only when it ends ready, and never from a later build to an
    earlier one; the taker's resources become the template's defaults."""
    await store.catalog.add_template(_template("t1"))
    await store.builds.add_build(_build("early", cpu=1))
    await store.builds.add_build(_build("late", at=NOW + timedelta(seconds=1), cpu=4))
    for build_id in ("early", "late"):
        assert await store.builds.start_build(build_id, from_states=["waiting"], status="building",
                                              at=NOW, recipe={"steps": []})
    assert await store.builds.finish_build("late", status="ready", at=NOW, digest="d2",
                                           from_states=["building"]) == ["default"]
    assert await store.builds.finish_build("early", status="ready", at=NOW, digest="d1",
                                           from_states=["building"]) == []
    tags = await store.catalog.list_tags("t1")
    assert [(t.tag, t.build_id) for t in tags] == [("default", "late")]
    template = await store.catalog.get_template("t1")
    assert template is not None and template.cpu_count == 4 and template.build_count == 2
    # A build that already ended cannot end again (compare and set).
    assert await store.builds.finish_build("late", status="error", at=NOW, reason="x",
                                           from_states=["waiting", "building"]) == []


async def test_a_build_id_is_added_once(store: SqlStore) -> None:
    """A second build with an id that exists is a conflict, and the first stays as it was."""
    await store.builds.add_build(_build("b1", cpu=1))
    with pytest.raises(StoreConflict):
        await store.builds.add_build(_build("b1", cpu=2))
    found = await store.builds.get_build("b1")
    assert found is not None and found.cpu_count == 1


async def test_restart_fails_unfinished_builds(store: SqlStore) -> None:
    """Waiting and building builds end in error with the reason; finished ones are kept."""
    await store.catalog.add_template(_template("t1"))
    for build_id in ("a", "b", "c"):
        await store.builds.add_build(_build(build_id))
    await store.builds.start_build("b", from_states=["waiting"], status="building", at=NOW)
    await store.builds.start_build("c", from_states=["waiting"], status="building", at=NOW)
    await store.builds.finish_build("c", status="ready", at=NOW, digest="d",
                                    from_states=["building"])
    assert sorted(await store.builds.fail_unfinished_builds("server restarted", NOW)) == ["a", "b"]
    build = await store.builds.get_build("b")
    assert build is not None and (build.status, build.reason) == ("error", "server restarted")


async def test_only_builds_no_replica_touches_are_failed(store: SqlStore) -> None:
    """Several replicas: each touches the builds it runs; the leader ends only those left
    untouched (their replica is gone), never one touched since, nor a finished one."""
    await store.catalog.add_template(_template("t1"))
    for build_id in ("gone", "running", "done"):
        await store.builds.add_build(_build(build_id))
    await store.builds.finish_build("done", status="ready", at=NOW, digest="d",
                                    from_states=["waiting"])
    later = NOW + timedelta(minutes=5)
    await store.builds.touch_builds(["running", "done", "unknown"], later)
    touched = await store.builds.get_build("running")
    assert touched is not None and touched.updated_at == later
    finished = await store.builds.get_build("done")
    assert finished is not None and finished.updated_at == NOW  # finished: left alone
    assert await store.builds.fail_unfinished_builds(
        "server restarted", later, untouched_since=NOW + timedelta(minutes=1)) == ["gone"]
    still = await store.builds.get_build("running")
    assert still is not None and still.status == "waiting"
    await store.builds.touch_builds([], later)  # nothing to say: no statement


async def test_logs_page_filter_and_delete_with_template(store: SqlStore) -> None:
    """Logs come back in order from an offset, filtered by level, and go with the template."""
    await store.catalog.add_template(_template("t1"))
    await store.builds.add_build(_build("b"))
    await store.builds.add_build_logs([
        BuildLogRecord("b", i, NOW, "error" if i % 3 == 0 else "info", f"line {i}", "1")
        for i in range(10)])
    assert [e.seq for e in await store.builds.build_logs("b", offset=2, limit=3)] == [2, 3, 4]
    assert [e.seq for e in await store.builds.build_logs("b", limit=10, levels=["error"])] == [
        0, 3, 6, 9]
    assert [e.seq for e in await store.builds.build_logs("b", limit=2, newest_first=True)] == [9, 8]
    await store.catalog.set_tags("t1", ["v1"], "b", NOW)
    assert await store.catalog.delete_template("t1")
    assert await store.builds.get_build("b") is None
    assert await store.builds.build_logs("b", limit=10) == []
    assert await store.catalog.list_tags("t1") == []


async def test_uploads_and_pins(store: SqlStore) -> None:
    """Uploads are per team and replaceable; pins of sandboxes that are gone are pruned."""
    upload = UploadRecord("alpha", "h" * 64, "/x", 10, NOW)
    await store.uploads.add_upload(upload)
    await store.uploads.add_upload(UploadRecord("alpha", "h" * 64, "/y", 20, NOW))
    assert await store.uploads.get_upload("beta", "h" * 64) is None
    found = await store.uploads.get_upload("alpha", "h" * 64)
    assert found is not None and (found.path, found.size_bytes) == ("/y", 20)
    pin = SandboxPin("sbx1", "t1", "b1", "digest")
    await store.catalog.pin_sandbox(pin)
    assert await store.catalog.sandbox_pin("sbx1") == pin
    assert await store.gc.prune_pins(["running", "paused"]) == 1
    assert await store.catalog.sandbox_pin("sbx1") is None
