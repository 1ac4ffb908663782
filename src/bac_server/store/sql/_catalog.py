"""The template catalog in SQL (:class:`bac_server.store.catalog.CatalogStore`): templates,
their tags, and the build each sandbox was created from."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.catalog import SandboxPin, TagRecord, TemplateRecord
from bac_server.store.sql import schema as t
from bac_server.store.sql._conflict import inserting
from bac_server.store.sql._dialect import insert, serialize
from bac_server.store.sql._time import dt, opt_dt, ts


def _template_values(template: TemplateRecord) -> dict[str, Any]:
    last_spawned = template.last_spawned_at
    return {
        "template_id": template.template_id, "team_id": template.team_id,
        "name": template.name, "public": template.public, "aliases": list(template.aliases),
        "cpu_count": template.cpu_count, "memory_mb": template.memory_mb,
        "disk_mb": template.disk_mb, "created_at": ts(template.created_at),
        "updated_at": ts(template.updated_at), "build_count": template.build_count,
        "spawn_count": template.spawn_count,
        "last_spawned_at": None if last_spawned is None else ts(last_spawned),
    }


def _template_record(r: Any) -> TemplateRecord:
    return TemplateRecord(
        template_id=r.template_id, team_id=r.team_id, name=r.name, public=bool(r.public),
        aliases=tuple(r.aliases or ()), cpu_count=r.cpu_count, memory_mb=r.memory_mb,
        disk_mb=r.disk_mb, created_at=dt(r.created_at), updated_at=dt(r.updated_at),
        build_count=r.build_count, spawn_count=r.spawn_count,
        last_spawned_at=opt_dt(r.last_spawned_at))


def _tag_record(r: Any) -> TagRecord:
    return TagRecord(template_id=r.template_id, tag=r.tag, build_id=r.build_id,
                     created_at=dt(r.created_at))


class SqlCatalog:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add_template(self, template: TemplateRecord) -> None:
        what = f"template {template.name!r} of team {template.team_id!r}"
        async with inserting(self._engine, what) as conn:
            await conn.execute(sa.insert(t.templates).values(**_template_values(template)))

    async def get_template(self, template_id: str) -> TemplateRecord | None:
        query = sa.select(t.templates).where(t.templates.c.template_id == template_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _template_record(row)

    async def visible_templates(self, team_id: str) -> list[TemplateRecord]:
        c = t.templates.c
        query = (sa.select(t.templates)
                 .where(sa.or_(c.team_id == team_id, c.public.is_(True)))
                 .order_by(c.created_at, c.template_id))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_template_record(r) for r in rows]

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
            # Before any row lock: a build finishing takes this lock, then rows (._builds).
            await serialize(conn, "template_tags", template_id)
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

    # tags ----------------------------------------------------------------------------------
    async def set_tags(self, template_id: str, tags: Collection[str], build_id: str,
                       at: datetime) -> None:
        c = t.template_tags.c
        async with self._engine.begin() as conn:
            await serialize(conn, "template_tags", template_id)
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
        return [_tag_record(r) for r in rows]

    # pins ----------------------------------------------------------------------------------
    async def pin_sandbox(self, pin: SandboxPin) -> None:
        c = t.sandbox_templates.c
        values = {"template_id": pin.template_id, "build_id": pin.build_id,
                  "digest": pin.digest}
        async with self._engine.begin() as conn:
            upsert = insert(conn, t.sandbox_templates).values(sandbox_id=pin.sandbox_id,
                                                               **values)
            await conn.execute(upsert.on_conflict_do_update(index_elements=[c.sandbox_id],
                                                            set_=values))

    async def sandbox_pin(self, sandbox_id: str) -> SandboxPin | None:
        query = sa.select(t.sandbox_templates).where(
            t.sandbox_templates.c.sandbox_id == sandbox_id)
        async with self._engine.connect() as conn:
            r = (await conn.execute(query)).first()
        if r is None:
            return None
        return SandboxPin(sandbox_id=r.sandbox_id, template_id=r.template_id,
                          build_id=r.build_id, digest=r.digest)
