"""Volumes and sandboxes' volume mounts in SQL (:class:`bac_server.store.volumes.VolumeStore`).

The token is sealed under ``volumes.token:<volume id>``. A name taken in the team is the
unique key's ``StoreConflict`` (``_conflict.inserting``); the team's size bound is checked
in the inserting transaction, under the team's lock (``_dialect.serialize``; SQLite's
single writer).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.sealing import Sealer
from bac_server.store.sql import schema as t
from bac_server.store.sql._conflict import inserting
from bac_server.store.sql._dialect import serialize
from bac_server.store.sql._time import dt, ts
from bac_server.store.volumes import VolumeMountRecord, VolumeRecord

_v = t.volumes.c
_m = t.volume_mounts.c


class _OverBound(Exception):
    """The volume would take its team past the bound: its transaction rolls back."""


def _where(volume_id: str) -> str:
    return f"volumes.token:{volume_id}"


def _mount(row: Any) -> VolumeMountRecord:
    return VolumeMountRecord(sandbox_id=row.sandbox_id, path=row.path,
                             volume_id=row.volume_id, team_id=row.team_id)


class SqlVolumes:
    def __init__(self, engine: AsyncEngine, sealer: Sealer) -> None:
        self._engine = engine
        self._sealer = sealer

    def _record(self, row: Any) -> VolumeRecord:
        return VolumeRecord(volume_id=row.volume_id, team_id=row.team_id, name=row.name,
                            token=self._sealer.open(row.token, _where(row.volume_id)),
                            size_mb=int(row.size_mb), created_at=dt(row.created_at))

    async def add_volume(self, volume: VolumeRecord, *,
                         max_team_mb: int | None = None) -> bool:
        v = volume
        try:
            async with inserting(self._engine, "volume") as conn:
                await serialize(conn, t.volumes.name, v.team_id)
                await conn.execute(sa.insert(t.volumes).values(
                    volume_id=v.volume_id, team_id=v.team_id, name=v.name,
                    token=self._sealer.seal(v.token, _where(v.volume_id)),
                    size_mb=v.size_mb, created_at=ts(v.created_at)))
                if max_team_mb is not None:
                    total = (await conn.execute(
                        sa.select(sa.func.coalesce(sa.func.sum(_v.size_mb), 0))
                        .where(_v.team_id == v.team_id))).scalar_one()
                    if int(total) > max_team_mb:
                        raise _OverBound
        except _OverBound:
            return False
        return True

    async def get_volume(self, volume_id: str) -> VolumeRecord | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(
                sa.select(t.volumes).where(_v.volume_id == volume_id))).first()
        return None if row is None else self._record(row)

    async def volume_named(self, team_id: str, name: str) -> VolumeRecord | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(sa.select(t.volumes).where(
                _v.team_id == team_id, _v.name == name))).first()
        return None if row is None else self._record(row)

    async def list_volumes(self, team_id: str) -> list[VolumeRecord]:
        query = sa.select(t.volumes).where(_v.team_id == team_id) \
            .order_by(_v.created_at, _v.volume_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [self._record(r) for r in rows]

    async def all_volumes(self) -> list[VolumeRecord]:
        async with self._engine.connect() as conn:
            rows = (await conn.execute(sa.select(t.volumes).order_by(_v.created_at))).all()
        return [self._record(r) for r in rows]

    async def delete_volume(self, volume_id: str) -> bool:
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(t.volume_mounts).where(_m.volume_id == volume_id))
            done = await conn.execute(sa.delete(t.volumes).where(_v.volume_id == volume_id))
            return bool(done.rowcount)

    async def add_mounts(self, mounts: list[VolumeMountRecord]) -> None:
        if not mounts:
            return
        async with inserting(self._engine, "volume mount") as conn:
            await conn.execute(sa.insert(t.volume_mounts), [
                {"sandbox_id": m.sandbox_id, "path": m.path, "volume_id": m.volume_id,
                 "team_id": m.team_id} for m in mounts])

    async def mounts_of(self, sandbox_id: str) -> list[VolumeMountRecord]:
        query = sa.select(t.volume_mounts).where(_m.sandbox_id == sandbox_id) \
            .order_by(_m.path)
        async with self._engine.connect() as conn:
            return [_mount(r) for r in (await conn.execute(query)).all()]

    async def all_mounts(self) -> list[VolumeMountRecord]:
        query = sa.select(t.volume_mounts).order_by(_m.sandbox_id, _m.path)
        async with self._engine.connect() as conn:
            return [_mount(r) for r in (await conn.execute(query)).all()]

    async def mounts_of_volume(self, volume_id: str) -> list[VolumeMountRecord]:
        query = sa.select(t.volume_mounts).where(_m.volume_id == volume_id) \
            .order_by(_m.sandbox_id, _m.path)
        async with self._engine.connect() as conn:
            return [_mount(r) for r in (await conn.execute(query)).all()]

    async def delete_mounts(self, sandbox_id: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(t.volume_mounts).where(_m.sandbox_id == sandbox_id))
