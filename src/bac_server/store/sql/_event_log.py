"""The event log read by team, for the events API and the webhook deliverer
(:class:`bac_server.store.webhooks.EventLogStore`): each event with its sandbox's row
(template, build, metadata, resources), outer-joined, so an event outlives its row."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.sandboxes import EventRecord
from bac_server.store.sealing import Sealer, open_event_fields
from bac_server.store.sql import schema as t
from bac_server.store.sql._time import dt, opt_dt, ts
from bac_server.store.webhooks import LoggedEvent

_e = t.sandbox_events.c
_s = t.sandboxes.c
_p = t.sandbox_templates.c


def _select() -> sa.Select[Any]:
    return (sa.select(_e.event_id, _e.sandbox_id, _e.team_id, _e.at, _e.kind, _e.level,
                      _e.message, _e.fields, _e.wire_type, _s.template_id, _s.metadata,
                      _s.started_at, _s.cpu_count, _s.memory_mb, _p.build_id)
            .select_from(t.sandbox_events
                         .outerjoin(t.sandboxes, _s.sandbox_id == _e.sandbox_id)
                         .outerjoin(t.sandbox_templates, _p.sandbox_id == _e.sandbox_id)))


def _logged(r: Any, sealer: Sealer) -> LoggedEvent:
    return LoggedEvent(
        event_id=r.event_id,
        event=EventRecord(r.sandbox_id, r.team_id, dt(r.at), r.kind, r.message, r.level,
                          open_event_fields(sealer, dict(r.fields), r.sandbox_id),
                          wire_type=r.wire_type),
        template_id=r.template_id, build_id=r.build_id,
        metadata=dict(r.metadata or {}), started_at=opt_dt(r.started_at),
        cpu_count=r.cpu_count, memory_mb=r.memory_mb)


class SqlEventLog:
    def __init__(self, engine: AsyncEngine, sealer: Sealer) -> None:
        self._engine = engine
        self._sealer = sealer

    async def team_events(
        self, team_id: str, *, sandbox_id: str | None, types: Collection[str], offset: int,
        limit: int, ascending: bool, since: datetime | None,
    ) -> list[LoggedEvent]:
        query = _select().where(_e.wire_type.in_(sorted(types)))
        if sandbox_id is not None:
            # By the sandbox's own index (every event of a sandbox is its team's; a row of
            # another team would be dropped below, never shown).
            query = query.where(_e.sandbox_id == sandbox_id)
        else:
            query = query.where(_e.team_id == team_id)
        if since is not None:
            query = query.where(_e.at >= ts(since))
        order = _e.event_id if ascending else _e.event_id.desc()
        query = query.order_by(order).offset(offset).limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_logged(r, self._sealer) for r in rows if r.team_id == team_id]

    async def events_for_delivery(
        self, *, team_ids: Collection[str], types: Collection[str], after_id: int,
        up_to_id: int | None = None, since: datetime | None = None, limit: int,
        newest_first: bool = False,
    ) -> list[LoggedEvent]:
        if not team_ids or not types:
            return []
        query = _select().where(_e.team_id.in_(sorted(team_ids)),
                                _e.wire_type.in_(sorted(types)), _e.event_id > after_id)
        if up_to_id is not None:
            query = query.where(_e.event_id <= up_to_id)
        if since is not None:
            query = query.where(_e.at >= ts(since))
        async with self._engine.connect() as conn:
            order = _e.event_id.desc() if newest_first else _e.event_id
            rows = (await conn.execute(query.order_by(order).limit(limit))).all()
        return [_logged(r, self._sealer) for r in rows]
