"""Teams and API keys in SQL (:class:`bac_server.store.keys.KeyStore`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.keys import ApiKeyRecord, TeamRecord
from bac_server.store.sql import schema as t
from bac_server.store.sql._conflict import inserting
from bac_server.store.sql._dialect import insert
from bac_server.store.sql._time import dt, opt_dt, ts


def _key_record(row: Any) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=row.key_id,
        team_id=row.team_id,
        name=row.name,
        key_hash=row.key_hash,
        prefix=row.prefix,
        created_at=dt(row.created_at),
        revoked_at=opt_dt(row.revoked_at),
    )


class SqlKeys:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def ensure_team(self, name: str) -> TeamRecord:
        async with self._engine.begin() as conn:
            # Made if missing in one statement: two first requests of a team both succeed.
            await conn.execute(insert(conn, t.teams).values(
                team_id=name, name=name, created_at=ts(datetime.now(UTC)),
            ).on_conflict_do_nothing())
            row = (await conn.execute(sa.select(t.teams).where(t.teams.c.name == name))).one()
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
        async with inserting(self._engine, f"API key {key.key_id}") as conn:
            await conn.execute(sa.insert(t.api_keys).values(**values))

    async def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        query = sa.select(t.api_keys).where(t.api_keys.c.key_hash == key_hash)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _key_record(row)

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
            (_key_record(r), TeamRecord(r.team_id, r.team_name, dt(r.team_created_at)))
            for r in rows
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
