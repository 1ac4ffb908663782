"""Usage per (sandbox, day) and the cost caps in SQL (:class:`bac_server.store.usage.UsageStore`).

A delta is added by one ``INSERT … ON CONFLICT DO UPDATE`` (SQLite and PostgreSQL both
have it), so two writers adding to the same row never lose either's amount. Group sums by
metadata read the sandbox rows' JSON metadata, joined on the sandbox id.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.sql import schema as t
from bac_server.store.sql._dialect import insert, insert_bounded
from bac_server.store.sql._time import dt, ts
from bac_server.store.usage import CapRecord, MeterMark, Usage, UsageDelta, UsageQuery

_u = t.usage_days.c
_c = t.cost_caps.c
_s = t.sandboxes.c
_AMOUNTS = ("vcpu_seconds", "memory_gib_seconds", "storage_gib_hours", "cpu_used_seconds")


def _cap(row: Any) -> CapRecord:
    return CapRecord(
        cap_id=row.cap_id, team_id=row.team_id, scope=row.scope, period=row.period,
        amount=float(row.amount), action=row.action, created_at=dt(row.created_at),
        updated_at=dt(row.updated_at), sandbox_id=row.sandbox_id,
        metadata_key=row.metadata_key, metadata_value=row.metadata_value,
        warned=row.warned, reached=row.reached)


def _cap_values(cap: CapRecord) -> dict[str, Any]:
    return {
        "cap_id": cap.cap_id, "team_id": cap.team_id, "scope": cap.scope,
        "period": cap.period, "amount": cap.amount, "action": cap.action,
        "sandbox_id": cap.sandbox_id, "metadata_key": cap.metadata_key,
        "metadata_value": cap.metadata_value, "warned": cap.warned, "reached": cap.reached,
        "created_at": ts(cap.created_at), "updated_at": ts(cap.updated_at),
    }


class SqlUsage:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add_usage(self, deltas: Sequence[UsageDelta]) -> None:
        if not deltas:
            return
        rows = [{"sandbox_id": d.sandbox_id, "day": d.day, "team_id": d.team_id,
                 "vcpu_seconds": d.usage.vcpu_seconds,
                 "memory_gib_seconds": d.usage.memory_gib_seconds,
                 "storage_gib_hours": d.usage.storage_gib_hours,
                 "cpu_used_seconds": d.usage.cpu_used_seconds,
                 "metered_until": ts(d.metered_until), "cpu_mark": d.cpu_mark}
                for d in deltas]
        async with self._engine.begin() as conn:
            # One statement for every sandbox (executemany): the write lock is held for
            # one round trip, not one per sandbox (a flush of 500 sandboxes held it for
            # seconds and other writers' busy timeout ran out).
            upsert = insert(conn, t.usage_days)
            added: dict[str, Any] = {
                name: getattr(t.usage_days.c, name) + getattr(upsert.excluded, name)
                for name in _AMOUNTS}
            later = upsert.excluded.metered_until >= _u.metered_until
            added["metered_until"] = sa.case(
                (later, upsert.excluded.metered_until), else_=_u.metered_until)
            # The counter read with the latest metering (none read: the one kept).
            added["cpu_mark"] = sa.case(
                (sa.and_(later, upsert.excluded.cpu_mark.is_not(None)),
                 upsert.excluded.cpu_mark), else_=_u.cpu_mark)
            await conn.execute(upsert.on_conflict_do_update(
                index_elements=[_u.sandbox_id, _u.day], set_=added), rows)

    async def usage(self, query: UsageQuery) -> list[tuple[str, Usage]]:
        sums = [sa.func.coalesce(sa.func.sum(getattr(_u, name)), 0.0) for name in _AMOUNTS]
        join = query.group_by == "metadata" or bool(query.metadata)
        key: Any
        if query.group_by == "sandbox":
            key = _u.sandbox_id
        elif query.group_by == "team":
            key = _u.team_id
        elif query.group_by == "day":
            key = _u.day
        else:
            key = sa.func.coalesce(_s.metadata[query.group_key].as_string(), "")
        select = sa.select(key.label("key"), *sums).where(_u.team_id == query.team_id)
        if join:
            select = select.select_from(t.usage_days.join(
                t.sandboxes, _s.sandbox_id == _u.sandbox_id))
        for name, value in sorted(query.metadata.items()):
            select = select.where(_s.metadata[name].as_string() == value)
        if query.sandbox_id is not None:
            select = select.where(_u.sandbox_id == query.sandbox_id)
        if query.since is not None:
            select = select.where(_u.day >= query.since)
        if query.until is not None:
            select = select.where(_u.day <= query.until)
        select = select.group_by(key)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select)).all()
        return [(str(r[0]), Usage(*(float(v) for v in r[1:]))) for r in rows]

    async def meter_marks(self, sandbox_ids: Collection[str]) -> dict[str, MeterMark]:
        if not sandbox_ids:
            return {}
        select = sa.select(_u.sandbox_id, _u.metered_until, _u.cpu_mark).where(
            _u.sandbox_id.in_(sorted(sandbox_ids)))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select)).all()
        marks: dict[str, MeterMark] = {}
        for sandbox_id, until, cpu_mark in rows:
            mark = marks.get(sandbox_id)
            if mark is None or dt(until) > mark.until:
                marks[sandbox_id] = MeterMark(dt(until), cpu_mark)
        return marks

    async def insert_cap(self, cap: CapRecord, *, max_per_team: int) -> bool:
        return await insert_bounded(self._engine, sa.insert(t.cost_caps).values(
            **_cap_values(cap)), t.cost_caps, cap.team_id, max_per_team)

    async def get_cap(self, team_id: str, cap_id: str) -> CapRecord | None:
        select = sa.select(t.cost_caps).where(_c.team_id == team_id, _c.cap_id == cap_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(select)).first()
        return None if row is None else _cap(row)

    async def list_caps(self, team_id: str | None = None) -> list[CapRecord]:
        select = sa.select(t.cost_caps).order_by(_c.created_at, _c.cap_id)
        if team_id is not None:
            select = select.where(_c.team_id == team_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select)).all()
        return [_cap(r) for r in rows]

    async def update_cap(self, cap: CapRecord) -> bool:
        async with self._engine.begin() as conn:
            done = await conn.execute(
                sa.update(t.cost_caps)
                .where(_c.team_id == cap.team_id, _c.cap_id == cap.cap_id)
                .values(amount=cap.amount, action=cap.action, warned=cap.warned,
                        reached=cap.reached, updated_at=ts(cap.updated_at)))
        return bool(done.rowcount)

    async def delete_cap(self, team_id: str, cap_id: str) -> bool:
        async with self._engine.begin() as conn:
            done = await conn.execute(sa.delete(t.cost_caps).where(
                _c.team_id == team_id, _c.cap_id == cap_id))
        return bool(done.rowcount)
