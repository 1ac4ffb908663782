"""Secrets in SQL (:class:`bac_server.store.secrets.SecretStore`).

The value column holds only sealed text (``secrets.value:<id>:<version>`` as associated
data: a value copied to another secret or version does not open); it is read in one
place, :meth:`SqlSecrets.secret_values`. ``ref`` is matched against the id first, then
the name (names that look like ids are refused by the control plane).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.sealing import Sealer
from bac_server.store.secrets import SecretRecord
from bac_server.store.sql import schema as t
from bac_server.store.sql._conflict import inserting
from bac_server.store.sql._time import dt, ts

_s = t.secrets.c
_COLUMNS = (_s.secret_id, _s.team_id, _s.name, _s.version, _s.metadata, _s.created_at,
            _s.updated_at)


def _where(secret_id: str, version: int) -> str:
    return f"secrets.value:{secret_id}:{version}"


def _record(row: Any) -> SecretRecord:
    return SecretRecord(secret_id=row.secret_id, team_id=row.team_id, name=row.name,
                        version=int(row.version), metadata=dict(json.loads(row.metadata)),
                        created_at=dt(row.created_at), updated_at=dt(row.updated_at))


def _ref(team_id: str, ref: str) -> sa.ColumnElement[bool]:
    return sa.and_(_s.team_id == team_id, sa.or_(_s.secret_id == ref, _s.name == ref))


class SqlSecrets:
    def __init__(self, engine: AsyncEngine, sealer: Sealer) -> None:
        self._engine = engine
        self._sealer = sealer

    async def add_secret(self, secret: SecretRecord, value: str) -> None:
        s = secret
        async with inserting(self._engine, "secret") as conn:
            await conn.execute(sa.insert(t.secrets).values(
                secret_id=s.secret_id, team_id=s.team_id, name=s.name, version=s.version,
                metadata=json.dumps(s.metadata, sort_keys=True),
                value=self._sealer.seal(value, _where(s.secret_id, s.version)),
                created_at=ts(s.created_at), updated_at=ts(s.updated_at)))

    async def get_secret(self, team_id: str, ref: str) -> SecretRecord | None:
        query = sa.select(*_COLUMNS).where(_ref(team_id, ref)).order_by(
            (_s.secret_id == ref).desc()).limit(1)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _record(row)

    async def list_secrets(self, team_id: str, after: tuple[datetime, str] | None,
                           limit: int) -> list[SecretRecord]:
        query = sa.select(*_COLUMNS).where(_s.team_id == team_id)
        if after is not None:
            mark, last = ts(after[0]), after[1]
            query = query.where(sa.or_(_s.created_at > mark,
                                       sa.and_(_s.created_at == mark, _s.secret_id > last)))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(
                query.order_by(_s.created_at, _s.secret_id).limit(limit))).all()
        return [_record(r) for r in rows]

    async def update_secret(self, team_id: str, ref: str, value: str,
                            metadata: dict[str, str] | None, at: datetime
                            ) -> SecretRecord | None:
        async with self._engine.begin() as conn:
            row = (await conn.execute(sa.select(*_COLUMNS).where(_ref(team_id, ref)).order_by(
                (_s.secret_id == ref).desc()).limit(1))).first()
            if row is None:
                return None
            version = int(row.version) + 1
            changes: dict[str, Any] = {
                "version": version, "updated_at": ts(at),
                "value": self._sealer.seal(value, _where(row.secret_id, version))}
            if metadata is not None:
                changes["metadata"] = json.dumps(metadata, sort_keys=True)
            # The version in the condition: two updates at once each seal their own
            # version, the second one re-reading (it finds no row at the old version).
            done = await conn.execute(sa.update(t.secrets).where(
                _s.secret_id == row.secret_id, _s.version == row.version).values(**changes))
            if done.rowcount != 1:
                return None
            found = (await conn.execute(sa.select(*_COLUMNS).where(
                _s.secret_id == row.secret_id))).first()
        return None if found is None else _record(found)

    async def delete_secret(self, team_id: str, ref: str) -> bool:
        async with self._engine.begin() as conn:
            row = (await conn.execute(sa.select(_s.secret_id).where(_ref(team_id, ref)).order_by(
                (_s.secret_id == ref).desc()).limit(1))).first()
            if row is None:
                return False
            await conn.execute(sa.delete(t.secrets).where(_s.secret_id == row.secret_id))
        return True

    async def secret_values(self, team_id: str, names: frozenset[str]) -> dict[str, str]:
        if not names:
            return {}
        query = sa.select(_s.secret_id, _s.name, _s.version, _s.value).where(
            _s.team_id == team_id, _s.name.in_(sorted(names)))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {r.name: self._sealer.open(r.value, _where(r.secret_id, int(r.version)))
                for r in rows}
