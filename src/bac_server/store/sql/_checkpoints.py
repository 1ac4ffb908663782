"""Checkpoints and snapshots in SQL (:class:`bac_server.store.checkpoints.CheckpointStore`).
Env vars and the envd token are sealed like a sandbox's, bound to the checkpoint's row."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.checkpoints import CheckpointKind, CheckpointRecord
from bac_server.store.sealing import Sealer
from bac_server.store.sql import schema as t
from bac_server.store.sql._conflict import inserting
from bac_server.store.sql._time import dt, ts


def _where(checkpoint_id: str, column: str) -> str:
    return f"checkpoints.{column}:{checkpoint_id}"


def _values(c: CheckpointRecord, sealer: Sealer) -> dict[str, Any]:
    return {
        "checkpoint_id": c.checkpoint_id, "team_id": c.team_id, "sandbox_id": c.sandbox_id,
        "kind": c.kind.value, "name": c.name, "created_at": ts(c.created_at),
        "size_bytes": c.size_bytes, "memory": c.memory, "template_id": c.template_id,
        "envd_access_token": sealer.seal(c.envd_access_token,
                                         _where(c.checkpoint_id, "envd_access_token")),
        "cpu_count": c.cpu_count, "memory_mb": c.memory_mb,
        "env_vars": sealer.seal_map(c.env_vars, _where(c.checkpoint_id, "env_vars")),
    }


def _record(r: Any, sealer: Sealer) -> CheckpointRecord:
    return CheckpointRecord(
        checkpoint_id=r.checkpoint_id, team_id=r.team_id, sandbox_id=r.sandbox_id,
        kind=CheckpointKind(r.kind), name=r.name, created_at=dt(r.created_at),
        size_bytes=r.size_bytes, memory=r.memory, template_id=r.template_id,
        envd_access_token=sealer.open(r.envd_access_token,
                                      _where(r.checkpoint_id, "envd_access_token")),
        cpu_count=r.cpu_count, memory_mb=r.memory_mb,
        env_vars=sealer.open_map(r.env_vars, _where(r.checkpoint_id, "env_vars")))


class SqlCheckpoints:
    def __init__(self, engine: AsyncEngine, sealer: Sealer) -> None:
        self._engine = engine
        self._sealer = sealer

    async def add_checkpoint(self, checkpoint: CheckpointRecord) -> None:
        async with inserting(self._engine, f"checkpoint {checkpoint.checkpoint_id}") as conn:
            await conn.execute(sa.insert(t.checkpoints).values(**_values(checkpoint, self._sealer)))

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        query = sa.select(t.checkpoints).where(t.checkpoints.c.checkpoint_id == checkpoint_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _record(row, self._sealer)

    async def list_checkpoints(
        self, team_id: str | None, *, sandbox_id: str | None = None,
        kind: CheckpointKind | None = None, name: str | None = None,
    ) -> list[CheckpointRecord]:
        c = t.checkpoints.c
        query = sa.select(t.checkpoints)
        if team_id is not None:
            query = query.where(c.team_id == team_id)
        if sandbox_id is not None:
            query = query.where(c.sandbox_id == sandbox_id)
        if kind is not None:
            query = query.where(c.kind == kind.value)
        if name is not None:
            query = query.where(c.name == name)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.order_by(c.created_at, c.checkpoint_id))).all()
        return [_record(r, self._sealer) for r in rows]

    async def delete_checkpoint(self, checkpoint_id: str) -> bool:
        query = sa.delete(t.checkpoints).where(t.checkpoints.c.checkpoint_id == checkpoint_id)
        async with self._engine.begin() as conn:
            return bool((await conn.execute(query)).rowcount)

    async def checkpoint_bytes(self, team_id: str) -> int:
        c = t.checkpoints.c
        query = sa.select(sa.func.coalesce(sa.func.sum(c.size_bytes), 0)).where(
            c.team_id == team_id)
        async with self._engine.connect() as conn:
            return int((await conn.execute(query)).scalar() or 0)

    async def bytes_by_sandbox(self) -> dict[str, int]:
        c = t.checkpoints.c
        query = sa.select(c.sandbox_id, sa.func.sum(c.size_bytes)).group_by(c.sandbox_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {r[0]: int(r[1] or 0) for r in rows}
