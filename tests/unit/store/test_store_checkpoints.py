"""The SQL store's checkpoints and lifecycle settings on each engine."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from bac_server.store import CheckpointKind, CheckpointRecord, SandboxRecord, StoreConflict
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

SEALER = Sealer(Sealer.new_key())  # one key for every store a test reopens


def _checkpoint(checkpoint_id: str, *, team: str = "team", sandbox: str = "abc",
                kind: CheckpointKind = CheckpointKind.CHECKPOINT, name: str | None = None,
                size: int = 100, at: datetime = NOW) -> CheckpointRecord:
    return CheckpointRecord(
        checkpoint_id=checkpoint_id, team_id=team, sandbox_id=sandbox, kind=kind, name=name,
        created_at=at, size_bytes=size, memory=True, template_id="base",
        envd_access_token="tok", cpu_count=2, memory_mb=512, env_vars={"A": "1"})


async def test_checkpoints_round_trip_filter_sum_and_delete(database_url: str) -> None:
    """Checkpoints come back as stored, oldest first, filtered by sandbox, kind and name;
    the team's bytes add up; ids are unique; delete says whether it deleted."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        first = _checkpoint("c1", size=10)
        await store.checkpoints.add_checkpoint(first)
        await store.checkpoints.add_checkpoint(_checkpoint(
            "c2", kind=CheckpointKind.SNAPSHOT, name="snap", size=20,
            at=NOW + timedelta(seconds=1)))
        await store.checkpoints.add_checkpoint(_checkpoint("c3", team="other", size=1000))
        with pytest.raises(StoreConflict):
            await store.checkpoints.add_checkpoint(first)
        assert await store.checkpoints.get_checkpoint("c1") == first
        listed = await store.checkpoints.list_checkpoints("team")
        assert [c.checkpoint_id for c in listed] == ["c1", "c2"]
        assert [c.checkpoint_id for c in await store.checkpoints.list_checkpoints(
            "team", kind=CheckpointKind.SNAPSHOT, name="snap")] == ["c2"]
        assert await store.checkpoints.list_checkpoints("team", sandbox_id="zzz") == []
        assert await store.checkpoints.checkpoint_bytes("team") == 30
        assert await store.checkpoints.delete_checkpoint("c1") is True
        assert await store.checkpoints.delete_checkpoint("c1") is False
        assert await store.checkpoints.checkpoint_bytes("team") == 20
    finally:
        await store.close()


async def test_lifecycle_settings_are_kept(database_url: str) -> None:
    """A sandbox's lifecycle settings are stored with it and can be updated."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        row = SandboxRecord(
            sandbox_id="abc", team_id="team", template_id="base", alias=None,
            state="running", started_at=NOW, end_at=NOW + timedelta(minutes=5), cpu_count=2,
            memory_mb=512, disk_mb=1024, envd_access_token="tok", traffic_access_token=None,
            lifecycle={"on_timeout": "pause", "auto_resume": True})
        await store.keys.ensure_team("team")
        await store.sandboxes.insert_sandbox(row)
        assert (await store.sandboxes.get_sandbox("abc")) == row
        await store.sandboxes.update_sandbox("abc", lifecycle={"paused_as": "disk"})
        found = await store.sandboxes.get_sandbox("abc")
        assert found == dataclasses.replace(row, lifecycle={"paused_as": "disk"})
    finally:
        await store.close()
