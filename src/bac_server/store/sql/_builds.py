"""Template builds and their logs in SQL (:class:`bac_server.store.builds.BuildStore`).

Status changes are compare-and-set (``from_states``): a cancel racing the build's own end,
or a restart sweep racing a late writer, changes the row once and the loser learns it lost.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bac_server.store.builds import BuildLogRecord, BuildRecord
from bac_server.store.sql import schema as t
from bac_server.store.sql._conflict import inserting
from bac_server.store.sql._dialect import free_text, serialize
from bac_server.store.sql._time import dt, opt_dt, ts

_UNFINISHED = ("waiting", "building")


def _build_values(b: BuildRecord) -> dict[str, Any]:
    return {
        "build_id": b.build_id, "template_id": b.template_id, "team_id": b.team_id,
        "status": b.status, "created_at": ts(b.created_at), "updated_at": ts(b.updated_at),
        "started_at": None if b.started_at is None else ts(b.started_at),
        "finished_at": None if b.finished_at is None else ts(b.finished_at),
        "cpu_count": b.cpu_count, "memory_mb": b.memory_mb, "disk_mb": b.disk_mb,
        "tags": list(b.tags), "recipe": b.recipe, "digest": b.digest, "config": b.config,
        "reason": b.reason, "reason_step": b.reason_step,
    }


def _build_record(r: Any) -> BuildRecord:
    return BuildRecord(
        build_id=r.build_id, template_id=r.template_id, team_id=r.team_id, status=r.status,
        created_at=dt(r.created_at), updated_at=dt(r.updated_at),
        started_at=opt_dt(r.started_at), finished_at=opt_dt(r.finished_at),
        cpu_count=r.cpu_count, memory_mb=r.memory_mb, disk_mb=r.disk_mb,
        tags=tuple(r.tags or ()), recipe=r.recipe, digest=r.digest, config=r.config,
        reason=r.reason, reason_step=r.reason_step)


def _log_values(e: BuildLogRecord) -> dict[str, Any]:
    return {"build_id": e.build_id, "seq": e.seq, "at": ts(e.at), "level": e.level,
            "step": e.step, "message": free_text(e.message)}


def _log_record(r: Any) -> BuildLogRecord:
    return BuildLogRecord(build_id=r.build_id, seq=r.seq, at=dt(r.at), level=r.level,
                          message=r.message, step=r.step)


class SqlBuilds:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add_build(self, build: BuildRecord) -> None:
        async with inserting(self._engine, f"build {build.build_id}") as conn:
            await conn.execute(sa.insert(t.template_builds).values(**_build_values(build)))

    async def get_build(self, build_id: str) -> BuildRecord | None:
        query = sa.select(t.template_builds).where(t.template_builds.c.build_id == build_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _build_record(row)

    async def list_builds(self, template_id: str) -> list[BuildRecord]:
        c = t.template_builds.c
        query = sa.select(t.template_builds).where(c.template_id == template_id).order_by(
            c.created_at.desc(), c.build_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_build_record(r) for r in rows]

    async def builds_in_states(self, states: Collection[str]) -> list[BuildRecord]:
        c = t.template_builds.c
        query = sa.select(t.template_builds).where(c.status.in_(list(states))).order_by(
            c.created_at, c.build_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_build_record(r) for r in rows]

    async def start_build(self, build_id: str, *, from_states: Collection[str], status: str,
                          at: datetime, recipe: dict[str, Any] | None = None) -> bool:
        c = t.template_builds.c
        values: dict[str, Any] = {"status": status, "updated_at": ts(at)}
        if recipe is not None:
            values["recipe"] = recipe
        if status == "building":
            values["started_at"] = ts(at)
        query = (sa.update(t.template_builds)
                 .where(c.build_id == build_id, c.status.in_(list(from_states)))
                 .values(**values))
        async with self._engine.begin() as conn:
            return bool((await conn.execute(query)).rowcount)

    async def finish_build(self, build_id: str, *, status: str, at: datetime,
                           from_states: Collection[str], digest: str | None = None,
                           config: dict[str, Any] | None = None, reason: str | None = None,
                           reason_step: str | None = None) -> list[str]:
        c = t.template_builds.c
        query = (sa.update(t.template_builds)
                 .where(c.build_id == build_id, c.status.in_(list(from_states)))
                 .values(status=status, updated_at=ts(at), finished_at=ts(at), digest=digest,
                         config=config, reason=None if reason is None else free_text(reason),
                         reason_step=reason_step))
        async with self._engine.begin() as conn:
            if status == "ready":
                # The template's tag lock before any row's (._dialect): a template deleted
                # meanwhile takes it first too, so neither waits on the other's rows.
                template_id = (await conn.execute(sa.select(c.template_id).where(
                    c.build_id == build_id))).scalar()
                await serialize(conn, "template_tags", str(template_id))
            if not (await conn.execute(query)).rowcount:
                return []
            if status != "ready":
                return []
            row = (await conn.execute(
                sa.select(t.template_builds).where(c.build_id == build_id))).one()
            return await _take_tags(conn, _build_record(row), at)

    async def fail_unfinished_builds(self, reason: str, at: datetime,
                                     untouched_since: datetime | None = None) -> list[str]:
        c = t.template_builds.c
        # One statement: a build that finishes (or is touched) meanwhile is left alone.
        where: sa.ColumnElement[bool] = c.status.in_(_UNFINISHED)
        if untouched_since is not None:
            where = sa.and_(where, c.updated_at < ts(untouched_since))
        query = (sa.update(t.template_builds).where(where)
                 .values(status="error", reason=reason, updated_at=ts(at), finished_at=ts(at))
                 .returning(c.build_id))
        async with self._engine.begin() as conn:
            return sorted((await conn.execute(query)).scalars())

    async def touch_builds(self, build_ids: Sequence[str], at: datetime) -> None:
        if not build_ids:
            return
        c = t.template_builds.c
        async with self._engine.begin() as conn:
            await conn.execute(sa.update(t.template_builds)
                               .where(c.build_id.in_(list(build_ids)),
                                      c.status.in_(_UNFINISHED))
                               .values(updated_at=ts(at)))

    # build logs ---------------------------------------------------------------------------
    async def add_build_logs(self, entries: Sequence[BuildLogRecord]) -> None:
        if not entries:
            return
        async with self._engine.begin() as conn:
            await conn.execute(sa.insert(t.template_build_logs),
                               [_log_values(e) for e in entries])

    async def build_logs(self, build_id: str, *, offset: int = 0, limit: int,
                         levels: Collection[str] | None = None, since: datetime | None = None,
                         newest_first: bool = False) -> list[BuildLogRecord]:
        c = t.template_build_logs.c
        query = sa.select(t.template_build_logs).where(c.build_id == build_id)
        if levels is not None:
            query = query.where(c.level.in_(list(levels)))
        if since is not None:
            query = query.where(c.at <= ts(since) if newest_first else c.at >= ts(since))
        query = query.order_by(c.seq.desc() if newest_first else c.seq)
        query = query.offset(offset).limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_log_record(r) for r in rows]


async def _take_tags(conn: AsyncConnection, build: BuildRecord, at: datetime) -> list[str]:
    """Give ``build`` each of its tags unless a build created later holds it; then make its
    resources the template's defaults if it took any tag."""
    tags, builds = t.template_tags.c, t.template_builds.c
    # The holders are read and the tags moved as one: under the template's tag lock on
    # PostgreSQL (taken by the caller), under SQLite's writer (held since the status
    # update).
    taken: list[str] = []
    for tag in build.tags:
        holder = (await conn.execute(
            sa.select(builds.created_at)
            .select_from(t.template_tags.join(
                t.template_builds, builds.build_id == tags.build_id))
            .where(tags.template_id == build.template_id, tags.tag == tag))).first()
        if holder is not None and holder.created_at > ts(build.created_at):
            continue  # a later build already finished ready and holds it
        await conn.execute(sa.delete(t.template_tags).where(
            tags.template_id == build.template_id, tags.tag == tag))
        await conn.execute(sa.insert(t.template_tags).values(
            template_id=build.template_id, tag=tag, build_id=build.build_id,
            created_at=ts(at)))
        taken.append(tag)
    tc = t.templates.c
    values: dict[str, Any] = {"build_count": tc.build_count + 1, "updated_at": ts(at)}
    if taken:
        values.update(cpu_count=build.cpu_count, memory_mb=build.memory_mb,
                      disk_mb=build.disk_mb)
    await conn.execute(sa.update(t.templates).where(
        tc.template_id == build.template_id).values(**values))
    return taken
