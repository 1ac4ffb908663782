"""Resource usage samples in SQL (:class:`bac_server.store.metrics.MetricStore`)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.metrics import MetricRecord
from bac_server.store.sql import schema as t
from bac_server.store.sql._time import dt, ts


class SqlMetrics:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add_metrics(self, samples: list[MetricRecord]) -> None:
        if not samples:
            return
        rows = [
            {
                "sandbox_id": s.sandbox_id,
                "at": ts(s.at),
                "cpu_count": s.cpu_count,
                "cpu_used_pct": s.cpu_used_pct,
                "mem_used": s.mem_used,
                "mem_total": s.mem_total,
                "mem_cache": s.mem_cache,
                "disk_used": s.disk_used,
                "disk_total": s.disk_total,
            }
            for s in samples
        ]
        async with self._engine.begin() as conn:
            await conn.execute(sa.insert(t.sandbox_metrics), rows)

    async def metrics(
        self, sandbox_id: str, start: datetime | None, end: datetime | None
    ) -> list[MetricRecord]:
        c = t.sandbox_metrics.c
        query = sa.select(t.sandbox_metrics).where(c.sandbox_id == sandbox_id)
        if start is not None:
            query = query.where(c.at >= ts(start))
        if end is not None:
            query = query.where(c.at <= ts(end))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.order_by(c.at))).all()
        return [
            MetricRecord(
                r.sandbox_id, dt(r.at), r.cpu_count, r.cpu_used_pct, r.mem_used, r.mem_total,
                r.mem_cache, r.disk_used, r.disk_total,
            )
            for r in rows
        ]

    async def prune_metrics(self, before: datetime) -> int:
        query = sa.delete(t.sandbox_metrics).where(t.sandbox_metrics.c.at < ts(before))
        async with self._engine.begin() as conn:
            return (await conn.execute(query)).rowcount
