"""Artefacts in SQL (:class:`bac_server.store.artefacts.ArtefactStore`).

The insert that may find its key taken is portable: it goes through ``_conflict.inserting``
(the database's unique-key error, whatever the dialect), and the row already there is read
back in a transaction of its own (PostgreSQL aborts the failed one). The team's byte bound
is checked in the inserting transaction, under the team's lock (``_dialect.serialize``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bac_server.store.artefacts import ArtefactKind, ArtefactRecord
from bac_server.store.base import StoreConflict
from bac_server.store.sql import schema as t
from bac_server.store.sql._conflict import inserting
from bac_server.store.sql._dialect import serialize
from bac_server.store.sql._time import dt, ts

_a = t.artefacts.c


class _OverBound(Exception):
    """The row would take its team past the bound: its transaction rolls back."""


def _record(row: Any) -> ArtefactRecord:
    return ArtefactRecord(
        team_id=row.team_id, run_id=row.run_id, name=row.name, sha256=row.sha256,
        size_bytes=int(row.size_bytes), kind=ArtefactKind(row.kind),
        sandbox_id=row.sandbox_id, source_path=row.source_path,
        created_at=dt(row.created_at))


class SqlArtefacts:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add_artefact(self, artefact: ArtefactRecord, *,
                           max_team_bytes: int | None = None) -> ArtefactRecord | None:
        a = artefact
        for _ in range(3):  # a row deleted between the conflict and the read: try again
            try:
                async with inserting(self._engine, "artefact") as conn:
                    # Inserted, then counted, under the team's lock (on SQLite the insert
                    # holds the writer): promotions at once never pass the bound together.
                    await serialize(conn, t.artefacts.name, a.team_id)
                    await conn.execute(sa.insert(t.artefacts).values(
                        team_id=a.team_id, run_id=a.run_id, name=a.name, sha256=a.sha256,
                        size_bytes=a.size_bytes, kind=a.kind.value, sandbox_id=a.sandbox_id,
                        source_path=a.source_path, created_at=ts(a.created_at)))
                    if max_team_bytes is not None and \
                            await self._team_bytes(conn, a.team_id) > max_team_bytes:
                        raise _OverBound
                return artefact
            except _OverBound:
                return None
            except StoreConflict:
                found = await self.get_artefact(a.team_id, a.run_id, a.name)
                if found is not None:
                    return found
        raise StoreConflict("artefact exists and went, again and again")

    async def get_artefact(self, team_id: str, run_id: str, name: str) -> ArtefactRecord | None:
        query = sa.select(t.artefacts).where(_a.team_id == team_id, _a.run_id == run_id,
                                             _a.name == name)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _record(row)

    async def list_artefacts(self, team_id: str, run_id: str) -> list[ArtefactRecord]:
        query = sa.select(t.artefacts).where(_a.team_id == team_id, _a.run_id == run_id) \
            .order_by(_a.created_at, _a.name)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_record(r) for r in rows]

    async def delete_artefact(self, team_id: str, run_id: str, name: str) -> bool:
        query = sa.delete(t.artefacts).where(_a.team_id == team_id, _a.run_id == run_id,
                                             _a.name == name)
        async with self._engine.begin() as conn:
            return bool((await conn.execute(query)).rowcount)

    async def artefact_bytes(self, team_id: str) -> int:
        async with self._engine.connect() as conn:
            return await self._team_bytes(conn, team_id)

    @staticmethod
    async def _team_bytes(conn: AsyncConnection, team_id: str) -> int:
        query = sa.select(sa.func.coalesce(sa.func.sum(_a.size_bytes), 0)).where(
            _a.team_id == team_id)
        return int((await conn.execute(query)).scalar_one())

    async def artefacts_before(self, before: datetime, limit: int) -> list[ArtefactRecord]:
        query = sa.select(t.artefacts).where(_a.created_at < ts(before)) \
            .order_by(_a.created_at, _a.team_id, _a.run_id, _a.name).limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_record(r) for r in rows]

    async def blob_in_use(self, sha256: str) -> bool:
        query = sa.select(_a.name).where(_a.sha256 == sha256).limit(1)
        async with self._engine.connect() as conn:
            return (await conn.execute(query)).first() is not None
