"""The SQL store's volumes and volume mounts on each engine."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bac_server.store import StoreConflict, VolumeMountRecord, VolumeRecord
from bac_server.store.sealing import Sealer, is_sealed
from bac_server.store.sql import SqlStore
from bac_server.store.sql import schema as t

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SEALER = Sealer(Sealer.new_key())


def _volume(vid: str, name: str, *, team: str = "team", size: int = 100,
            at: datetime = NOW) -> VolumeRecord:
    return VolumeRecord(volume_id=vid, team_id=team, name=name, token=f"tok-{vid}",
                        size_mb=size, created_at=at)


async def test_volumes_round_trip_names_unique_per_team_token_sealed(database_url: str) -> None:
    """Volumes come back as stored, per team, oldest first; a name is one volume per team
    (another team may use it); the token is sealed in the table."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        first = _volume("v1", "data")
        assert await store.volumes.add_volume(first)
        assert await store.volumes.add_volume(_volume("v2", "more", at=NOW + timedelta(1)))
        assert await store.volumes.add_volume(_volume("v3", "data", team="other"))
        with pytest.raises(StoreConflict):
            await store.volumes.add_volume(_volume("v4", "data"))
        assert await store.volumes.get_volume("v1") == first
        assert await store.volumes.volume_named("team", "data") == first
        assert await store.volumes.volume_named("team", "nope") is None
        assert [v.volume_id for v in await store.volumes.list_volumes("team")] == ["v1", "v2"]
        assert {v.volume_id for v in await store.volumes.all_volumes()} == {"v1", "v2", "v3"}
        engine = store._engine
        async with engine.connect() as conn:
            raw = (await conn.execute(t.volumes.select())).all()
        assert all(is_sealed(r.token) and "tok-" not in r.token for r in raw)
        assert await store.volumes.delete_volume("v1")
        assert not await store.volumes.delete_volume("v1")
        assert await store.volumes.get_volume("v1") is None
    finally:
        await store.close()


async def test_team_size_bound_holds_under_concurrent_creates(database_url: str) -> None:
    """Creates at once never take a team past its bound together."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        results = await asyncio.gather(*(
            store.volumes.add_volume(_volume(f"v{i}", f"n{i}", size=100), max_team_mb=300)
            for i in range(6)))
        assert sum(results) == 3
        assert len(await store.volumes.list_volumes("team")) == 3
    finally:
        await store.close()


async def test_mounts_by_sandbox_and_volume_and_gone_with_the_volume(database_url: str) -> None:
    """A sandbox's mounts come back by path; by volume; deleting the sandbox's or the
    volume's removes them."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        await store.volumes.add_volume(_volume("v1", "data"))
        await store.volumes.add_volume(_volume("v2", "more"))
        mounts = [VolumeMountRecord("s1", "/mnt/b", "v2", "team"),
                  VolumeMountRecord("s1", "/mnt/a", "v1", "team"),
                  VolumeMountRecord("s2", "/data", "v1", "team")]
        await store.volumes.add_mounts(mounts)
        await store.volumes.add_mounts([])
        assert [m.path for m in await store.volumes.mounts_of("s1")] == ["/mnt/a", "/mnt/b"]
        assert [m.sandbox_id for m in await store.volumes.mounts_of_volume("v1")] == \
            ["s1", "s2"]
        assert len(await store.volumes.all_mounts()) == 3
        with pytest.raises(StoreConflict):
            await store.volumes.add_mounts([VolumeMountRecord("s1", "/mnt/a", "v2", "team")])
        await store.volumes.delete_mounts("s1")
        assert await store.volumes.mounts_of("s1") == []
        await store.volumes.delete_volume("v1")
        assert await store.volumes.all_mounts() == []
    finally:
        await store.close()
