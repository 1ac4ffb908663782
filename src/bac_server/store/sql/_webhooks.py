"""Webhooks, their deliveries and the deliverer's cursor in SQL
(:class:`bac_server.store.webhooks.WebhookStore`). A webhook's signature secret is sealed
on the way in and opened on the way out, bound to its row."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.sealing import Sealer
from bac_server.store.sql import schema as t
from bac_server.store.sql._dialect import free_text, insert, insert_bounded, serialize
from bac_server.store.sql._time import dt, opt_dt, ts
from bac_server.store.webhooks import (
    Attempt,
    DeliveryQuery,
    DeliveryRecord,
    DeliveryStats,
    WebhookRecord,
)

_w = t.webhooks.c
_d = t.webhook_deliveries.c
_CURSOR = "events"
_FINISHED = ("success", "failed")


def _where(webhook_id: str) -> str:
    return f"webhooks.secret:{webhook_id}"


def _webhook(row: Any, sealer: Sealer) -> WebhookRecord:
    return WebhookRecord(
        webhook_id=row.webhook_id, team_id=row.team_id, name=row.name, url=row.url,
        events=tuple(row.events), enabled=bool(row.enabled),
        secret=sealer.open(row.secret, _where(row.webhook_id)),
        created_at=dt(row.created_at), updated_at=dt(row.updated_at))


def _webhook_values(w: WebhookRecord, sealer: Sealer) -> dict[str, Any]:
    return {
        "webhook_id": w.webhook_id, "team_id": w.team_id, "name": w.name, "url": w.url,
        "events": list(w.events), "enabled": w.enabled,
        "secret": sealer.seal(w.secret, _where(w.webhook_id)),
        "created_at": ts(w.created_at), "updated_at": ts(w.updated_at),
    }


def _delivery(row: Any) -> DeliveryRecord:
    return DeliveryRecord(
        delivery_id=row.delivery_id, webhook_id=row.webhook_id, team_id=row.team_id,
        event_id=row.event_id, event_type=row.event_type, body=row.body,
        created_at=dt(row.created_at), next_attempt_at=dt(row.next_attempt_at),
        status=row.status, attempts=row.attempts, last_attempt_at=opt_dt(row.last_attempt_at),
        delivered_at=opt_dt(row.delivered_at), response_code=row.response_code,
        last_error=row.last_error, duration_ms=row.duration_ms, seq=row.seq)


class SqlWebhooks:
    def __init__(self, engine: AsyncEngine, sealer: Sealer) -> None:
        self._engine = engine
        self._sealer = sealer

    async def insert_webhook(self, webhook: WebhookRecord, *, max_per_team: int) -> bool:
        return await insert_bounded(
            self._engine, sa.insert(t.webhooks).values(**_webhook_values(webhook, self._sealer)),
            t.webhooks, webhook.team_id, max_per_team)

    async def get_webhook(self, team_id: str, webhook_id: str) -> WebhookRecord | None:
        query = sa.select(t.webhooks).where(_w.team_id == team_id, _w.webhook_id == webhook_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _webhook(row, self._sealer)

    async def list_webhooks(self, team_id: str) -> list[WebhookRecord]:
        query = sa.select(t.webhooks).where(_w.team_id == team_id).order_by(
            _w.created_at, _w.webhook_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_webhook(r, self._sealer) for r in rows]

    async def enabled_webhooks(self) -> list[WebhookRecord]:
        query = sa.select(t.webhooks).where(_w.enabled.is_(True)).order_by(_w.webhook_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_webhook(r, self._sealer) for r in rows]

    async def update_webhook(self, webhook: WebhookRecord) -> bool:
        values = _webhook_values(webhook, self._sealer)
        del values["webhook_id"], values["team_id"], values["created_at"]
        async with self._engine.begin() as conn:
            done = await conn.execute(
                sa.update(t.webhooks)
                .where(_w.team_id == webhook.team_id, _w.webhook_id == webhook.webhook_id)
                .values(**values))
        return bool(done.rowcount)

    async def delete_webhook(self, team_id: str, webhook_id: str) -> bool:
        async with self._engine.begin() as conn:
            done = await conn.execute(sa.delete(t.webhooks).where(
                _w.team_id == team_id, _w.webhook_id == webhook_id))
            if done.rowcount:
                await conn.execute(sa.delete(t.webhook_deliveries).where(
                    _d.webhook_id == webhook_id))
        return bool(done.rowcount)

    async def cursor(self) -> int:
        c = t.webhook_cursor.c
        async with self._engine.connect() as conn:
            value = (await conn.execute(sa.select(c.value).where(c.name == _CURSOR))).scalar()
        return int(value or 0)

    async def owe(self, deliveries: Sequence[DeliveryRecord], cursor: int) -> int:
        c = t.webhook_cursor.c
        async with self._engine.begin() as conn:
            new = 0
            await serialize(conn, "webhook_deliveries")  # seqs in commit order (._dialect)
            for d in deliveries:
                done = await conn.execute(insert(conn, t.webhook_deliveries).values(
                    delivery_id=d.delivery_id, webhook_id=d.webhook_id, team_id=d.team_id,
                    event_id=d.event_id, event_type=d.event_type, body=d.body,
                    status=d.status, attempts=d.attempts, created_at=ts(d.created_at),
                    next_attempt_at=ts(d.next_attempt_at)).on_conflict_do_nothing())
                new += done.rowcount or 0
            # One statement: the cursor only moves forward, whoever writes it at once.
            moved = insert(conn, t.webhook_cursor).values(name=_CURSOR, value=cursor)
            await conn.execute(moved.on_conflict_do_update(
                index_elements=[c.name],
                set_={"value": sa.case((moved.excluded.value > c.value, moved.excluded.value),
                                       else_=c.value)}))
        return new

    async def due(self, now: datetime, limit: int,
                  skip: Collection[str] = ()) -> list[DeliveryRecord]:
        query = sa.select(t.webhook_deliveries).where(
            _d.status == "pending", _d.next_attempt_at <= ts(now))
        if skip:
            query = query.where(_d.webhook_id.not_in(sorted(skip)))
        query = query.order_by(_d.next_attempt_at, _d.seq).limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_delivery(r) for r in rows]

    async def record_attempt(self, delivery_id: str, attempt: Attempt) -> None:
        values: dict[str, Any] = {
            "status": attempt.status, "attempts": attempt.attempts,
            "last_attempt_at": ts(attempt.at), "next_attempt_at": ts(attempt.next_attempt_at),
            "response_code": attempt.response_code,
            "last_error": None if attempt.error is None else free_text(attempt.error),
            "duration_ms": attempt.duration_ms,
        }
        if attempt.status == "success":
            values["delivered_at"] = ts(attempt.at)
        async with self._engine.begin() as conn:
            await conn.execute(sa.update(t.webhook_deliveries)
                               .where(_d.delivery_id == delivery_id).values(**values))

    async def deliveries(self, team_id: str, webhook_id: str,
                         query: DeliveryQuery) -> list[DeliveryRecord]:
        select = sa.select(t.webhook_deliveries).where(
            _d.team_id == team_id, _d.webhook_id == webhook_id)
        if query.after_seq is not None:
            select = select.where(_d.seq > query.after_seq if query.ascending
                                  else _d.seq < query.after_seq)
        if query.statuses:
            select = select.where(_d.status.in_(sorted(query.statuses)))
        if query.event_types:
            select = select.where(_d.event_type.in_(sorted(query.event_types)))
        if query.since is not None:
            select = select.where(_d.created_at >= ts(query.since))
        if query.until is not None:
            select = select.where(_d.created_at < ts(query.until))
        select = select.order_by(_d.seq if query.ascending else _d.seq.desc()).limit(query.limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select)).all()
        return [_delivery(r) for r in rows]

    async def delivery(self, team_id: str, webhook_id: str,
                       delivery_id: str) -> DeliveryRecord | None:
        query = sa.select(t.webhook_deliveries).where(
            _d.team_id == team_id, _d.webhook_id == webhook_id, _d.delivery_id == delivery_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _delivery(row)

    async def delivery_stats(self, team_id: str, webhook_id: str, *,
                             since: datetime | None, until: datetime | None) -> DeliveryStats:
        select = (sa.select(_d.status, sa.func.count(), sa.func.avg(_d.duration_ms))
                  .where(_d.team_id == team_id, _d.webhook_id == webhook_id)
                  .group_by(_d.status))
        if since is not None:
            select = select.where(_d.created_at >= ts(since))
        if until is not None:
            select = select.where(_d.created_at < ts(until))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select)).all()
        counts = {r[0]: int(r[1]) for r in rows}
        timed = [(int(r[1]), float(r[2])) for r in rows if r[2] is not None]
        weight = sum(n for n, _ in timed)
        return DeliveryStats(
            total=sum(counts.values()), success=counts.get("success", 0),
            failed=counts.get("failed", 0), pending=counts.get("pending", 0),
            average_duration_ms=(sum(n * a for n, a in timed) / weight) if weight else None)

    async def prune_deliveries(self, before: datetime) -> int:
        async with self._engine.begin() as conn:
            done = await conn.execute(sa.delete(t.webhook_deliveries).where(
                _d.status.in_(_FINISHED), _d.created_at < ts(before)))
        return int(done.rowcount or 0)

