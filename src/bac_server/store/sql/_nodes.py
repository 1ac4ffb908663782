"""Nodes and placements in SQL (:class:`bac_server.store.nodes.NodeStore`).

A placement is chosen and inserted under the ``nodes`` lock (``_dialect.serialize``): on
PostgreSQL two API replicas placing at once take turns, each seeing what the other
placed; on SQLite the transaction writes first (a no-op update of the lock row's table)
so it holds the database's one write lock before it reads.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bac_server.store.nodes import (
    Chooser,
    NodeLoad,
    NodeRecord,
    NodeState,
    PlacedKind,
    Placement,
)
from bac_server.store.sql import schema as t
from bac_server.store.sql._dialect import insert, serialize
from bac_server.store.sql._time import dt, ts

_n = t.nodes.c
_p = t.placements.c


def _node(row: Any) -> NodeRecord:
    return NodeRecord(node_id=row.node_id, address=row.address, rpc_port=int(row.rpc_port),
                      tunnel_port=int(row.tunnel_port), vcpus=int(row.vcpus),
                      memory_mb=int(row.memory_mb), state=NodeState(row.state),
                      heartbeat_at=dt(row.heartbeat_at), started_at=dt(row.started_at),
                      version=row.version, sandboxes=int(row.sandboxes))


def _placement(row: Any) -> Placement:
    return Placement(object_id=row.object_id, kind=PlacedKind(row.kind), node_id=row.node_id,
                     vcpus=int(row.vcpus), memory_mb=int(row.memory_mb))


def _values(p: Placement) -> dict[str, Any]:
    return {"object_id": p.object_id, "kind": p.kind.value, "node_id": p.node_id,
            "vcpus": p.vcpus, "memory_mb": p.memory_mb}


async def _loads(conn: AsyncConnection, fresh_since: datetime) -> list[NodeLoad]:
    """Each fresh active node with what is placed on it, in one read."""
    placed = (sa.select(_p.node_id, sa.func.count().label("placed_count"),
                        sa.func.sum(_p.vcpus).label("vcpus"),
                        sa.func.sum(_p.memory_mb).label("memory"))
              .where(_p.kind == PlacedKind.SANDBOX.value)
              .group_by(_p.node_id).subquery())
    rows = (await conn.execute(
        sa.select(t.nodes, placed.c.placed_count, placed.c.vcpus, placed.c.memory)
        .outerjoin(placed, placed.c.node_id == _n.node_id)
        .where(_n.state == NodeState.ACTIVE.value, _n.heartbeat_at >= ts(fresh_since))
        .order_by(_n.node_id))).all()
    return [NodeLoad(node=_node(r), sandboxes_placed=int(r.placed_count or 0),
                     vcpus_placed=int(r.vcpus or 0), memory_mb_placed=int(r.memory or 0))
            for r in rows]


class SqlNodes:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def register_node(self, node: NodeRecord) -> None:
        values = {"node_id": node.node_id, "address": node.address,
                  "rpc_port": node.rpc_port, "tunnel_port": node.tunnel_port,
                  "vcpus": node.vcpus, "memory_mb": node.memory_mb,
                  "state": node.state.value, "heartbeat_at": ts(node.heartbeat_at),
                  "started_at": ts(node.started_at), "version": node.version,
                  "sandboxes": node.sandboxes}
        async with self._engine.begin() as conn:
            stmt = insert(conn, t.nodes).values(**values)
            await conn.execute(stmt.on_conflict_do_update(
                index_elements=[_n.node_id],
                set_={k: v for k, v in values.items() if k != "node_id"}))

    async def beat(self, node_id: str, at: datetime, sandboxes: int) -> NodeState | None:
        async with self._engine.begin() as conn:
            before = (await conn.execute(
                sa.select(_n.state).where(_n.node_id == node_id))).scalar_one_or_none()
            if before is None:
                return None
            state = NodeState(before)
            await conn.execute(sa.update(t.nodes).where(_n.node_id == node_id).values(
                heartbeat_at=ts(at), sandboxes=sandboxes,
                state=NodeState.ACTIVE.value if state is NodeState.LOST else state.value))
        return state

    async def list_nodes(self) -> list[NodeRecord]:
        async with self._engine.connect() as conn:
            rows = (await conn.execute(sa.select(t.nodes).order_by(_n.node_id))).all()
        return [_node(r) for r in rows]

    async def set_node_state(self, node_id: str, state: NodeState) -> bool:
        async with self._engine.begin() as conn:
            done = await conn.execute(sa.update(t.nodes).where(_n.node_id == node_id)
                                      .values(state=state.value))
        return bool(done.rowcount)

    async def mark_lost(self, silent_since: datetime) -> list[str]:
        async with self._engine.begin() as conn:
            rows = (await conn.execute(
                sa.update(t.nodes)
                .where(_n.state != NodeState.LOST.value,
                       _n.heartbeat_at < ts(silent_since))
                .values(state=NodeState.LOST.value)
                .returning(_n.node_id))).all()
        return sorted(r.node_id for r in rows)

    async def place(self, placement: Placement, choose: Chooser,
                    fresh_since: datetime, *, moving_from: str | None = None) -> str | None:
        async with self._engine.begin() as conn:
            await serialize(conn, "nodes")
            if conn.dialect.name == "sqlite":
                # Take SQLite's write lock before reading (see the module's docstring).
                await conn.execute(sa.update(t.nodes).where(sa.false()).values(sandboxes=0))
            if moving_from is not None:
                now_on = (await conn.execute(sa.select(_p.node_id).where(
                    _p.object_id == placement.object_id))).scalar()
                if now_on != moving_from:
                    return None
            loads = await _loads(conn, fresh_since)
            if not loads:
                return None
            chosen = choose(loads)
            if chosen is None:
                return None
            stmt = insert(conn, t.placements).values(
                **_values(Placement(placement.object_id, placement.kind, chosen,
                                    placement.vcpus, placement.memory_mb)))
            await conn.execute(stmt.on_conflict_do_update(
                index_elements=[_p.object_id],
                set_={"node_id": chosen, "kind": placement.kind.value,
                      "vcpus": placement.vcpus, "memory_mb": placement.memory_mb}))
        return chosen

    async def loads(self, fresh_since: datetime) -> list[NodeLoad]:
        async with self._engine.connect() as conn:
            return await _loads(conn, fresh_since)

    async def record_placement(self, placement: Placement) -> None:
        values = _values(placement)
        async with self._engine.begin() as conn:
            stmt = insert(conn, t.placements).values(**values)
            await conn.execute(stmt.on_conflict_do_update(
                index_elements=[_p.object_id],
                set_={k: v for k, v in values.items() if k != "object_id"}))

    async def placement(self, object_id: str) -> Placement | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(
                sa.select(t.placements).where(_p.object_id == object_id))).first()
        return None if row is None else _placement(row)

    async def placements(self, node_id: str | None = None) -> list[Placement]:
        query = sa.select(t.placements).order_by(_p.object_id)
        if node_id is not None:
            query = query.where(_p.node_id == node_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_placement(r) for r in rows]

    async def unplace(self, object_id: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(t.placements).where(_p.object_id == object_id))
