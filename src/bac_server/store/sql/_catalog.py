"""SQL queries for templates, tags, uploads and sandbox pins, mixed into
:class:`bac_server.store.sql.SqlStore` (builds and their logs: :mod:`._builds`)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.base import StoreConflict
from bac_server.store.catalog import SandboxPin, TagRecord, TemplateRecord
from bac_server.store.sql import schema as t
from bac_server.store.sql._rows import ts
from bac_server.store.sql._template_rows import (
    tag_record,
    template_record,
    template_values,
    upload_record,
    upload_values,
)
from bac_server.store.uploads import UploadRecord


class TemplateQueries:
    _engine: AsyncEngine

    async def add_template(self, template: TemplateRecord) -> None:
        try:
            async with self._engine.begin() as conn:
                await conn.execute(sa.insert(t.templates).values(**template_values(template)))
        except IntegrityError as exc:
            raise StoreConflict(
                f"template {template.name!r} of team {template.team_id!r} exists") from exc

    async def get_template(self, template_id: str) -> TemplateRecord | None:
        query = sa.select(t.templates).where(t.templates.c.template_id == template_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else template_record(row)

    async def visible_templates(self, team_id: str) -> list[TemplateRecord]:
        c = t.templates.c
        query = (sa.select(t.templates)
                 .where(sa.or_(c.team_id == team_id, c.public.is_(True)))
                 .order_by(c.created_at, c.template_id))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [template_record(r) for r in rows]

    async def update_template(self, template_id: str, *, at: datetime,
                              public: bool | None = None) -> bool:
        values: dict[str, object] = {"updated_at": ts(at)}
        if public is not None:
            values["public"] = public
        query = (sa.update(t.templates).where(t.templates.c.template_id == template_id)
                 .values(**values))
        async with self._engine.begin() as conn:
            return bool((await conn.execute(query)).rowcount)

    async def delete_template(self, template_id: str) -> bool:
        builds = sa.select(t.template_builds.c.build_id).where(
            t.template_builds.c.template_id == template_id)
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(t.template_build_logs).where(
                t.template_build_logs.c.build_id.in_(builds)))
            await conn.execute(sa.delete(t.template_tags).where(
                t.template_tags.c.template_id == template_id))
            await conn.execute(sa.delete(t.template_builds).where(
                t.template_builds.c.template_id == template_id))
            gone = await conn.execute(sa.delete(t.templates).where(
                t.templates.c.template_id == template_id))
            return bool(gone.rowcount)

    async def template_spawned(self, template_id: str, at: datetime) -> None:
        c = t.templates.c
        query = (sa.update(t.templates).where(c.template_id == template_id)
                 .values(spawn_count=c.spawn_count + 1, last_spawned_at=ts(at)))
        async with self._engine.begin() as conn:
            await conn.execute(query)

    # tags ---------------------------------------------------------------------------------
    async def set_tags(self, template_id: str, tags: Collection[str], build_id: str,
                       at: datetime) -> None:
        c = t.template_tags.c
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(t.template_tags).where(
                c.template_id == template_id, c.tag.in_(list(tags))))
            if tags:
                await conn.execute(sa.insert(t.template_tags), [
                    {"template_id": template_id, "tag": tag, "build_id": build_id,
                     "created_at": ts(at)} for tag in tags])

    async def delete_tags(self, template_id: str, tags: Collection[str]) -> int:
        c = t.template_tags.c
        query = sa.delete(t.template_tags).where(c.template_id == template_id,
                                                 c.tag.in_(list(tags)))
        async with self._engine.begin() as conn:
            return (await conn.execute(query)).rowcount

    async def list_tags(self, template_id: str) -> list[TagRecord]:
        c = t.template_tags.c
        query = sa.select(t.template_tags).where(c.template_id == template_id).order_by(
            c.created_at, c.tag)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [tag_record(r) for r in rows]

    # uploads ------------------------------------------------------------------------------
    async def add_upload(self, upload: UploadRecord) -> None:
        c = t.template_uploads.c
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(t.template_uploads).where(
                c.team_id == upload.team_id, c.files_hash == upload.files_hash))
            await conn.execute(sa.insert(t.template_uploads).values(**upload_values(upload)))

    async def get_upload(self, team_id: str, files_hash: str) -> UploadRecord | None:
        c = t.template_uploads.c
        query = sa.select(t.template_uploads).where(c.team_id == team_id,
                                                    c.files_hash == files_hash)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else upload_record(row)

    # pins ---------------------------------------------------------------------------------
    async def pin_sandbox(self, pin: SandboxPin) -> None:
        c = t.sandbox_templates.c
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(t.sandbox_templates).where(
                c.sandbox_id == pin.sandbox_id))
            await conn.execute(sa.insert(t.sandbox_templates).values(
                sandbox_id=pin.sandbox_id, template_id=pin.template_id,
                build_id=pin.build_id, digest=pin.digest))

    async def sandbox_pin(self, sandbox_id: str) -> SandboxPin | None:
        query = sa.select(t.sandbox_templates).where(
            t.sandbox_templates.c.sandbox_id == sandbox_id)
        async with self._engine.connect() as conn:
            r = (await conn.execute(query)).first()
        if r is None:
            return None
        return SandboxPin(sandbox_id=r.sandbox_id, template_id=r.template_id,
                          build_id=r.build_id, digest=r.digest)

    async def prune_pins(self, live_states: Collection[str]) -> int:
        live = sa.select(t.sandboxes.c.sandbox_id).where(
            t.sandboxes.c.state.in_(list(live_states)))
        # A snapshot or checkpoint still needs its sandbox's layers to start from.
        saved = sa.select(t.checkpoints.c.sandbox_id)
        pinned = t.sandbox_templates.c.sandbox_id
        query = sa.delete(t.sandbox_templates).where(pinned.not_in(live), pinned.not_in(saved))
        async with self._engine.begin() as conn:
            return (await conn.execute(query)).rowcount
