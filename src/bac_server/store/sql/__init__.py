"""The SQL store: :class:`bac_server.store.base.Store` on SQLAlchemy Core (async).

Written against SQLite (the embedded default) with portable Core constructs only, so the
same class serves PostgreSQL given an ``postgresql+asyncpg://`` URL. No ORM: rows become the
frozen records of the interfaces' modules right here.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.base import StoreConflict
from bac_server.store.keys import ApiKeyRecord, TeamRecord
from bac_server.store.metrics import MetricRecord
from bac_server.store.sandboxes import EventRecord, SandboxRecord
from bac_server.store.sealing import Sealer
from bac_server.store.sql import schema as t
from bac_server.store.sql._builds import TemplateBuildQueries
from bac_server.store.sql._catalog import TemplateQueries
from bac_server.store.sql._checkpoints import CheckpointQueries
from bac_server.store.sql._gc import TemplateGcQueries
from bac_server.store.sql._rows import (
    dt,
    event_values,
    key_record,
    sandbox_record,
    sandbox_values,
    ts,
)
from bac_server.store.sql.engine import open_engine
from bac_server.store.sql.migrations import migrate


class SqlStore(CheckpointQueries, TemplateQueries, TemplateBuildQueries, TemplateGcQueries):
    """One engine, one transaction per call. Open with :meth:`open`; ``sealer`` seals the
    secrets of every row written and opens them in every row read."""

    def __init__(self, engine: AsyncEngine, sealer: Sealer) -> None:
        self._engine = engine
        self._sealer = sealer

    @classmethod
    async def open(cls, url: str, sealer: Sealer) -> SqlStore:
        engine = open_engine(url)
        await migrate(engine, sealer)
        return cls(engine, sealer)

    async def close(self) -> None:
        await self._engine.dispose()

    # teams and API keys -------------------------------------------------------------------
    async def ensure_team(self, name: str) -> TeamRecord:
        async with self._engine.begin() as conn:
            row = (await conn.execute(sa.select(t.teams).where(t.teams.c.name == name))).first()
            if row is None:
                now = datetime.now(UTC)
                team_id = name
                await conn.execute(
                    sa.insert(t.teams).values(team_id=team_id, name=name, created_at=ts(now))
                )
                return TeamRecord(team_id=team_id, name=name, created_at=now)
            return TeamRecord(row.team_id, row.name, dt(row.created_at))

    async def add_api_key(self, key: ApiKeyRecord) -> None:
        values = {
            "key_id": key.key_id,
            "team_id": key.team_id,
            "name": key.name,
            "key_hash": key.key_hash,
            "prefix": key.prefix,
            "created_at": ts(key.created_at),
            "revoked_at": None if key.revoked_at is None else ts(key.revoked_at),
        }
        try:
            async with self._engine.begin() as conn:
                await conn.execute(sa.insert(t.api_keys).values(**values))
        except IntegrityError as exc:
            raise StoreConflict(f"API key {key.key_id} exists") from exc

    async def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        query = sa.select(t.api_keys).where(t.api_keys.c.key_hash == key_hash)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else key_record(row)

    async def list_api_keys(self) -> list[tuple[ApiKeyRecord, TeamRecord]]:
        query = (
            sa.select(t.api_keys, t.teams.c.name.label("team_name"), t.teams.c.created_at.label(
                "team_created_at"))
            .join(t.teams, t.teams.c.team_id == t.api_keys.c.team_id)
            .order_by(t.api_keys.c.created_at)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            (key_record(r), TeamRecord(r.team_id, r.team_name, dt(r.team_created_at))) for r in rows
        ]

    async def revoke_api_key(self, key_id_or_prefix: str, at: datetime) -> int:
        c = t.api_keys.c
        query = (
            sa.update(t.api_keys)
            .where(sa.or_(c.key_id == key_id_or_prefix, c.prefix == key_id_or_prefix))
            .where(c.revoked_at.is_(None))
            .values(revoked_at=ts(at))
        )
        async with self._engine.begin() as conn:
            return (await conn.execute(query)).rowcount

    # sandboxes ----------------------------------------------------------------------------
    async def insert_sandbox(self, sandbox: SandboxRecord, *events: EventRecord) -> None:
        try:
            async with self._engine.begin() as conn:
                await conn.execute(
                    sa.insert(t.sandboxes).values(**sandbox_values(sandbox, self._sealer)))
                if events:
                    await conn.execute(
                        sa.insert(t.sandbox_events), [event_values(e) for e in events]
                    )
        except IntegrityError as exc:
            raise StoreConflict(f"sandbox {sandbox.sandbox_id} exists") from exc

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
            if event is not None:
                await conn.execute(sa.insert(t.sandbox_events).values(**event_values(event)))

    async def get_sandbox(self, sandbox_id: str) -> SandboxRecord | None:
        query = sa.select(t.sandboxes).where(t.sandboxes.c.sandbox_id == sandbox_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else sandbox_record(row, self._sealer)

    async def sandboxes_in_states(self, states: Collection[str]) -> list[SandboxRecord]:
        query = sa.select(t.sandboxes).where(t.sandboxes.c.state.in_(list(states)))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [sandbox_record(r, self._sealer) for r in rows]

    async def add_event(self, event: EventRecord) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(sa.insert(t.sandbox_events).values(**event_values(event)))

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
        return [
            EventRecord(r.sandbox_id, r.team_id, dt(r.at), r.kind, r.message, r.level, r.fields)
            for r in rows
        ]

    # metrics ------------------------------------------------------------------------------
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
