"""Sandbox rows and their event log in SQL (:class:`bac_server.store.sandboxes.SandboxStore`).
Env vars and access tokens are sealed on the way in and opened on the way out
(:mod:`bac_server.store.sealing`), each bound to its row and column."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bac_server.store.sandboxes import EventRecord, SandboxChange, SandboxRecord, TraceQuery
from bac_server.store.sealing import Sealer, open_event_fields, seal_event_fields
from bac_server.store.sql import schema as t
from bac_server.store.sql._conflict import inserting
from bac_server.store.sql._coordination import SANDBOXES, announce
from bac_server.store.sql._dialect import free_text, serialize
from bac_server.store.sql._time import dt, opt_dt, ts

log = logging.getLogger(__name__)


def _sandbox_values(s: SandboxRecord, sealer: Sealer) -> dict[str, Any]:
    def where(column: str) -> str:
        return f"sandboxes.{column}:{s.sandbox_id}"

    return {
        "sandbox_id": s.sandbox_id,
        "team_id": s.team_id,
        "template_id": s.template_id,
        "alias": s.alias,
        "state": s.state,
        "started_at": ts(s.started_at),
        "end_at": ts(s.end_at),
        "ended_at": None if s.ended_at is None else ts(s.ended_at),
        "cpu_count": s.cpu_count,
        "memory_mb": s.memory_mb,
        "disk_mb": s.disk_mb,
        "envd_access_token": sealer.seal(s.envd_access_token, where("envd_access_token")),
        "traffic_access_token": sealer.seal_optional(s.traffic_access_token,
                                                     where("traffic_access_token")),
        "metadata": s.metadata,
        "env_vars": sealer.seal_map(s.env_vars, where("env_vars")),
        "network": s.network,
        "allow_internet_access": s.allow_internet_access,
        "lifecycle": s.lifecycle,
        "key_name": s.key_name,
    }


def _sandbox_record(row: Any, sealer: Sealer) -> SandboxRecord:
    def where(column: str) -> str:
        return f"sandboxes.{column}:{row.sandbox_id}"

    return SandboxRecord(
        sandbox_id=row.sandbox_id,
        team_id=row.team_id,
        template_id=row.template_id,
        alias=row.alias,
        state=row.state,
        started_at=dt(row.started_at),
        end_at=dt(row.end_at),
        cpu_count=row.cpu_count,
        memory_mb=row.memory_mb,
        disk_mb=row.disk_mb,
        envd_access_token=sealer.open(row.envd_access_token, where("envd_access_token")),
        traffic_access_token=sealer.open_optional(row.traffic_access_token,
                                                  where("traffic_access_token")),
        metadata=dict(row.metadata),
        env_vars=sealer.open_map(row.env_vars, where("env_vars")),
        network=row.network,
        allow_internet_access=row.allow_internet_access,
        ended_at=opt_dt(row.ended_at),
        lifecycle=row.lifecycle,
        key_name=row.key_name,
    )


def _event_values(e: EventRecord, sealer: Sealer,
                  metadata: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "sandbox_id": e.sandbox_id,
        "team_id": e.team_id,
        "at": ts(e.at),
        "kind": e.kind,
        "level": e.level,
        "message": free_text(e.message),
        "fields": seal_event_fields(sealer, e.fields, e.sandbox_id),
        "wire_type": e.wire_type,
        "metadata": e.metadata or metadata or {},
    }


def _event_record(r: Any, sealer: Sealer) -> EventRecord:
    return EventRecord(r.sandbox_id, r.team_id, dt(r.at), r.kind, r.message, r.level,
                       open_event_fields(sealer, dict(r.fields), r.sandbox_id),
                       event_id=r.event_id, metadata=dict(r.metadata or {}),
                       wire_type=r.wire_type)


async def _insert_events(conn: AsyncConnection, events: Sequence[EventRecord],
                         sealer: Sealer) -> list[EventRecord]:
    """Each event with its sandbox's metadata as it is now (read in the same transaction);
    returns them as written."""
    if not events:
        return []
    wanted = {e.sandbox_id for e in events if not e.metadata}
    owners: dict[str, dict[str, str]] = {}
    if wanted:
        c = t.sandboxes.c
        rows = await conn.execute(
            sa.select(c.sandbox_id, c.metadata).where(c.sandbox_id.in_(sorted(wanted))))
        owners = {r.sandbox_id: dict(r.metadata or {}) for r in rows}
    await serialize(conn, "sandbox_events")  # ids in commit order (._dialect)
    await conn.execute(sa.insert(t.sandbox_events),
                       [_event_values(e, sealer, owners.get(e.sandbox_id)) for e in events])
    return [_as_written(e, owners.get(e.sandbox_id)) for e in events]


def _as_written(e: EventRecord, metadata: dict[str, str] | None) -> EventRecord:
    return e if e.metadata or not metadata else dataclasses.replace(e, metadata=metadata)


def _lifecycle(events: Sequence[EventRecord]) -> bool:
    return any(e.wire_type is not None for e in events)


class SqlSandboxes:
    def __init__(self, engine: AsyncEngine, sealer: Sealer,
                 on_lifecycle_event: Callable[[], None] | None = None,
                 on_logged: Callable[[Sequence[EventRecord]], None] | None = None,
                 origin: str = "") -> None:
        """``origin``: this process's name in the announcements of its writes to the other
        replicas (``store.coordination``). ``on_lifecycle_event``: called after each
        commit that logged a lifecycle event (one with a ``wire_type``), e.g. to wake the
        webhook deliverer;
        ``on_logged``: after each commit that logged events, with them as written (their
        sandbox's metadata filled in), e.g. to export them as spans. Both run on the
        event loop and must not block."""
        self._engine = engine
        self._sealer = sealer
        self._on_lifecycle_event = on_lifecycle_event
        self._on_logged = on_logged
        self._origin = origin

    def _logged(self, events: Sequence[EventRecord]) -> None:
        if self._on_lifecycle_event is not None and _lifecycle(events):
            self._on_lifecycle_event()
        if self._on_logged is not None and events:
            try:
                self._on_logged(events)
            except Exception:
                # The events are committed: a listener's failure is not the writer's.
                log.exception("a listener of the event log failed")

    async def insert_sandbox(self, sandbox: SandboxRecord, *events: EventRecord) -> None:
        async with inserting(self._engine, f"sandbox {sandbox.sandbox_id}") as conn:
            await conn.execute(
                sa.insert(t.sandboxes).values(**_sandbox_values(sandbox, self._sealer)))
            if events:
                await serialize(conn, "sandbox_events")
                await conn.execute(
                    sa.insert(t.sandbox_events),
                    [_event_values(e, self._sealer, sandbox.metadata) for e in events])
            await announce(conn, SANDBOXES, self._origin, [sandbox.sandbox_id])
        self._logged([_as_written(e, sandbox.metadata) for e in events])

    async def update_sandbox(
        self,
        sandbox_id: str,
        *,
        state: str | None = None,
        end_at: datetime | None = None,
        ended_at: datetime | None = None,
        event: EventRecord | None = None,
        lifecycle: dict[str, Any] | None = None,
        network: dict[str, Any] | None = None,
        allow_internet_access: bool | None = None,
    ) -> None:
        values: dict[str, Any] = {}
        if lifecycle is not None:
            values["lifecycle"] = lifecycle
        if network is not None:
            values["network"] = network
        if allow_internet_access is not None:
            values["allow_internet_access"] = allow_internet_access
        if state is not None:
            values["state"] = state
        if end_at is not None:
            values["end_at"] = ts(end_at)
        if ended_at is not None:
            values["ended_at"] = ts(ended_at)
        async with self._engine.begin() as conn:
            if values:
                await conn.execute(
                    sa.update(t.sandboxes)
                    .where(t.sandboxes.c.sandbox_id == sandbox_id)
                    .values(**values)
                )
                await announce(conn, SANDBOXES, self._origin, [sandbox_id])
            written = [] if event is None else await _insert_events(conn, [event], self._sealer)
        self._logged(written)

    async def update_sandboxes(self, changes: Sequence[SandboxChange]) -> None:
        if not changes:
            return
        c = t.sandboxes.c
        update = (sa.update(t.sandboxes).where(c.sandbox_id == sa.bindparam("b_id"))
                  .values(state=sa.bindparam("b_state"),
                          lifecycle=sa.bindparam("b_lifecycle", type_=c.lifecycle.type)))
        async with self._engine.begin() as conn:
            # One statement for every row (executemany), not one round trip each.
            await conn.execute(update, [{"b_id": ch.sandbox_id, "b_state": ch.state,
                                         "b_lifecycle": ch.lifecycle} for ch in changes])
            await announce(conn, SANDBOXES, self._origin, [ch.sandbox_id for ch in changes])
            written = await _insert_events(
                conn, [c.event for c in changes if c.event is not None], self._sealer)
        self._logged(written)

    async def get_sandbox(self, sandbox_id: str) -> SandboxRecord | None:
        query = sa.select(t.sandboxes).where(t.sandboxes.c.sandbox_id == sandbox_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _sandbox_record(row, self._sealer)

    async def sandboxes_in_states(self, states: Collection[str]) -> list[SandboxRecord]:
        query = sa.select(t.sandboxes).where(t.sandboxes.c.state.in_(list(states)))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_sandbox_record(r, self._sealer) for r in rows]

    async def add_event(self, event: EventRecord) -> None:
        async with self._engine.begin() as conn:
            written = await _insert_events(conn, [event], self._sealer)
        self._logged(written)

    async def add_events(self, events: Sequence[EventRecord]) -> None:
        async with self._engine.begin() as conn:
            written = await _insert_events(conn, events, self._sealer)
        self._logged(written)

    async def trace(self, query: TraceQuery) -> list[EventRecord]:
        c = t.sandbox_events.c
        select = sa.select(t.sandbox_events).where(c.team_id == query.team_id,
                                                   c.event_id > query.after_id)
        if query.sandbox_id is not None:
            select = select.where(c.sandbox_id == query.sandbox_id)
        if query.kinds:
            select = select.where(c.kind.in_(sorted(query.kinds)))
        if query.since is not None:
            select = select.where(c.at >= ts(query.since))
        if query.until is not None:
            select = select.where(c.at < ts(query.until))
        for key, value in sorted(query.metadata.items()):
            select = select.where(c.metadata[key].as_string() == value)
        select = select.order_by(c.event_id).limit(query.limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select)).all()
        return [_event_record(r, self._sealer) for r in rows]

    async def prune_events(self, *, before: datetime, keep_per_sandbox: int,
                           counted_kinds: Collection[str]) -> int:
        c = t.sandbox_events.c
        async with self._engine.begin() as conn:
            gone = (await conn.execute(
                sa.delete(t.sandbox_events).where(c.at < ts(before)))).rowcount or 0
            if counted_kinds:
                kinds = sorted(counted_kinds)
                counted = (sa.select(c.sandbox_id).where(c.kind.in_(kinds))
                           .group_by(c.sandbox_id)
                           .having(sa.func.count() > keep_per_sandbox))
                for sandbox_id in (await conn.execute(counted)).scalars().all():
                    newest = (sa.select(c.event_id)
                              .where(c.sandbox_id == sandbox_id, c.kind.in_(kinds))
                              .order_by(c.event_id.desc()).limit(keep_per_sandbox))
                    gone += (await conn.execute(
                        sa.delete(t.sandbox_events).where(
                            c.sandbox_id == sandbox_id, c.kind.in_(kinds),
                            c.event_id.not_in(newest)))).rowcount or 0
        return gone

    async def events(
        self, sandbox_id: str, *, since: datetime | None, limit: int, newest_first: bool
    ) -> list[EventRecord]:
        c = t.sandbox_events.c
        query = sa.select(t.sandbox_events).where(c.sandbox_id == sandbox_id)
        if since is not None:
            query = query.where(c.at >= ts(since))
        order = (c.at.desc(), c.event_id.desc()) if newest_first else (c.at, c.event_id)
        query = query.order_by(*order).limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_event_record(r, self._sealer) for r in rows]
