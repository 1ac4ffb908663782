"""Uploaded build contexts in SQL (:class:`bac_server.store.uploads.UploadStore`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.sql import schema as t
from bac_server.store.sql._dialect import insert
from bac_server.store.sql._time import dt, ts
from bac_server.store.uploads import UploadRecord


def _upload_values(u: UploadRecord) -> dict[str, Any]:
    return {"team_id": u.team_id, "files_hash": u.files_hash, "path": u.path,
            "size_bytes": u.size_bytes, "created_at": ts(u.created_at)}


def _upload_record(r: Any) -> UploadRecord:
    return UploadRecord(team_id=r.team_id, files_hash=r.files_hash, path=r.path,
                        size_bytes=r.size_bytes, created_at=dt(r.created_at))


class SqlUploads:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add_upload(self, upload: UploadRecord) -> None:
        c = t.template_uploads.c
        values = _upload_values(upload)
        async with self._engine.begin() as conn:
            upsert = insert(conn, t.template_uploads).values(**values)
            await conn.execute(upsert.on_conflict_do_update(
                index_elements=[c.team_id, c.files_hash],
                set_={k: v for k, v in values.items() if k not in ("team_id", "files_hash")}))

    async def get_upload(self, team_id: str, files_hash: str) -> UploadRecord | None:
        c = t.template_uploads.c
        query = sa.select(t.template_uploads).where(c.team_id == team_id,
                                                    c.files_hash == files_hash)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _upload_record(row)

    async def all_uploads(self) -> list[UploadRecord]:
        c = t.template_uploads.c
        query = sa.select(t.template_uploads).order_by(c.created_at, c.team_id, c.files_hash)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_upload_record(r) for r in rows]

    async def delete_upload(self, team_id: str, files_hash: str, created_at: datetime) -> bool:
        c = t.template_uploads.c
        query = sa.delete(t.template_uploads).where(
            c.team_id == team_id, c.files_hash == files_hash,
            # Stored as float seconds: allow for the round trip through a datetime.
            c.created_at.between(ts(created_at) - 1e-3, ts(created_at) + 1e-3))
        async with self._engine.begin() as conn:
            return bool((await conn.execute(query)).rowcount)

    async def upload_bytes(self, team_id: str) -> int:
        c = t.template_uploads.c
        query = sa.select(sa.func.coalesce(sa.func.sum(c.size_bytes), 0)).where(
            c.team_id == team_id)
        async with self._engine.connect() as conn:
            return int((await conn.execute(query)).scalar_one())
