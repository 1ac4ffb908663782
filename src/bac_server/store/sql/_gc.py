"""SQL queries for collecting template storage, mixed into
:class:`bac_server.store.sql.SqlStore` (protocols: gc, builds, uploads)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.builds import BuildRecord
from bac_server.store.sql import schema as t
from bac_server.store.sql._rows import ts
from bac_server.store.sql._template_rows import build_record, upload_record
from bac_server.store.uploads import UploadRecord


class TemplateGcQueries:
    _engine: AsyncEngine

    async def live_digests(self, live_states: Collection[str]) -> set[str]:
        builds, tags, pins = t.template_builds.c, t.template_tags.c, t.sandbox_templates.c
        tagged = (sa.select(builds.digest)
                  .join(t.template_tags, tags.build_id == builds.build_id)
                  .where(builds.status == "ready", builds.digest.is_not(None)))
        live = sa.select(t.sandboxes.c.sandbox_id).where(
            t.sandboxes.c.state.in_(list(live_states)))
        known = sa.select(t.sandboxes.c.sandbox_id)
        saved = sa.select(t.checkpoints.c.sandbox_id)
        pinned = sa.select(pins.digest).where(sa.or_(
            pins.sandbox_id.in_(live), pins.sandbox_id.in_(saved),
            pins.sandbox_id.not_in(known)))
        async with self._engine.connect() as conn:
            found = {r[0] for r in (await conn.execute(tagged)).all()}
            found.update(r[0] for r in (await conn.execute(pinned)).all())
        return {str(d) for d in found if d}

    async def builds_in_states(self, states: Collection[str]) -> list[BuildRecord]:
        c = t.template_builds.c
        query = sa.select(t.template_builds).where(c.status.in_(list(states))).order_by(
            c.created_at, c.build_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [build_record(r) for r in rows]

    async def all_uploads(self) -> list[UploadRecord]:
        c = t.template_uploads.c
        query = sa.select(t.template_uploads).order_by(c.created_at, c.team_id, c.files_hash)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [upload_record(r) for r in rows]

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
