"""Nodes and placements on each engine: registration, beats (a lost node beating is active
again), marking silent nodes lost once, and placement: the chooser sees only fresh active
nodes with what is placed on each, and concurrent placements never overfill a node."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from bac_server.nodes import spread
from bac_server.store import NodeLoad, NodeRecord, NodeState, PlacedKind, Placement
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SEALER = Sealer(Sealer.new_key())


def _node(node_id: str, memory_mb: int = 4096, at: datetime = NOW) -> NodeRecord:
    return NodeRecord(node_id=node_id, address="10.0.0.1", rpc_port=7070, tunnel_port=7071,
                      vcpus=4, memory_mb=memory_mb, state=NodeState.ACTIVE, heartbeat_at=at,
                      started_at=at, version="1", sandboxes=0)


def _sandbox(sandbox_id: str, memory_mb: int = 1024) -> Placement:
    return Placement(sandbox_id, PlacedKind.SANDBOX, "", 2, memory_mb)


async def test_nodes_beat_are_lost_once_and_come_back(database_url: str) -> None:
    store = await SqlStore.open(database_url, SEALER)
    try:
        nodes = store.nodes
        await nodes.register_node(_node("a"))
        await nodes.register_node(_node("b"))
        assert await nodes.beat("nope", NOW, 0) is None  # no row: must register again
        assert await nodes.beat("a", NOW + timedelta(seconds=20), 3) is NodeState.ACTIVE
        # b is silent since NOW: lost, once, whoever asks again.
        assert await nodes.mark_lost(NOW + timedelta(seconds=10)) == ["b"]
        assert await nodes.mark_lost(NOW + timedelta(seconds=10)) == []
        listed = {n.node_id: n for n in await nodes.list_nodes()}
        assert (listed["a"].state, listed["a"].sandboxes) == (NodeState.ACTIVE, 3)
        assert listed["b"].state is NodeState.LOST
        # Beating again makes it active; it says it was lost.
        assert await nodes.beat("b", NOW + timedelta(seconds=30), 0) is NodeState.LOST
        assert {n.state for n in await nodes.list_nodes()} == {NodeState.ACTIVE}
        assert await nodes.set_node_state("a", NodeState.DRAINING)
        assert not await nodes.set_node_state("nope", NodeState.DRAINING)
        # Registering again (a restarted node) replaces its row, state included.
        await nodes.register_node(_node("a", memory_mb=8192))
        assert [n.memory_mb for n in await nodes.list_nodes() if n.node_id == "a"] == [8192]
    finally:
        await store.close()


async def test_placement_sees_fresh_active_nodes_and_their_load(database_url: str) -> None:
    store = await SqlStore.open(database_url, SEALER)
    try:
        nodes = store.nodes
        for node_id in ("a", "b", "c", "d"):
            await nodes.register_node(_node(node_id))
        await nodes.set_node_state("c", NodeState.DRAINING)
        await nodes.beat("a", NOW + timedelta(seconds=60), 0)
        await nodes.beat("b", NOW + timedelta(seconds=60), 0)
        await nodes.beat("c", NOW + timedelta(seconds=60), 0)
        fresh = NOW + timedelta(seconds=30)  # d's beat is older: not offered
        seen: list[Sequence[NodeLoad]] = []

        def choose(loads: Sequence[NodeLoad]) -> str | None:
            seen.append(loads)
            return spread(1024)(loads)

        assert await nodes.place(_sandbox("s1"), choose, fresh) == "a"
        assert await nodes.place(_sandbox("s2"), choose, fresh) == "b"
        assert await nodes.place(_sandbox("s3", 2048), choose, fresh) == "a"
        assert [(n.node.node_id, n.sandboxes_placed, n.memory_mb_placed)
                for n in seen[-1]] == [("a", 1, 1024), ("b", 1, 1024)]
        # Checkpoints count no memory; the chooser's None places nothing.
        await nodes.record_placement(Placement("c1", PlacedKind.CHECKPOINT, "b"))
        assert await nodes.place(_sandbox("s4"), lambda loads: None, fresh) is None
        assert await nodes.placement("s4") is None
        assert await nodes.placement("s3") == Placement("s3", PlacedKind.SANDBOX, "a", 2,
                                                        2048)
        assert [p.object_id for p in await nodes.placements("b")] == ["c1", "s2"]
        await nodes.unplace("s3")
        await nodes.unplace("s3")  # idempotent
        assert [p.object_id for p in await nodes.placements("a")] == ["s1"]
    finally:
        await store.close()


async def test_concurrent_placements_never_overfill_a_node(database_url: str) -> None:
    """Two stores (two replicas) place 20 sandboxes at once on two nodes that hold 4 each:
    exactly 8 are placed, 4 on each."""
    one = await SqlStore.open(database_url, SEALER)
    two = await SqlStore.open(database_url, SEALER)
    try:
        await one.nodes.register_node(_node("a", memory_mb=4096))
        await one.nodes.register_node(_node("b", memory_mb=4096))
        placed = await asyncio.gather(*(
            (one if n % 2 else two).nodes.place(_sandbox(f"s{n}"), spread(1024), NOW)
            for n in range(20)))
        assert sorted(p for p in placed if p is not None) == ["a"] * 4 + ["b"] * 4
        assert len(await one.nodes.placements()) == 8
    finally:
        await one.close()
        await two.close()


async def test_a_move_happens_once_and_only_from_the_node_named(database_url: str) -> None:
    """Two replicas moving one sandbox off a lost node at once: one moves it, the other
    finds it moved; a move from a node it is not on changes nothing."""
    one = await SqlStore.open(database_url, SEALER)
    two = await SqlStore.open(database_url, SEALER)
    try:
        for node_id in ("a", "b", "c"):
            await one.nodes.register_node(_node(node_id))
        await one.nodes.record_placement(Placement("s1", PlacedKind.SANDBOX, "a", 2, 1024))
        await one.nodes.set_node_state("a", NodeState.LOST)
        moves = await asyncio.gather(*(
            store.nodes.place(_sandbox("s1"), spread(1024), NOW, moving_from="a")
            for store in (one, two)))
        assert sorted(moves, key=str) == [None, "b"]
        assert (await one.nodes.placement("s1")) == Placement(
            "s1", PlacedKind.SANDBOX, "b", 2, 1024)
        assert await one.nodes.place(_sandbox("s1"), spread(1024), NOW,
                                     moving_from="a") is None
        assert await one.nodes.place(_sandbox("gone"), spread(1024), NOW,
                                     moving_from="a") is None
        assert await one.nodes.placement("gone") is None
    finally:
        await one.close()
        await two.close()


def test_spread_prefers_room_then_fewer_sandboxes_then_the_id() -> None:
    def load(node_id: str, memory: int, placed_mb: int, count: int) -> NodeLoad:
        return NodeLoad(node=_node(node_id, memory_mb=memory), vcpus_placed=0,
                        memory_mb_placed=placed_mb, sandboxes_placed=count)

    choose = spread(1024)
    assert choose([load("a", 4096, 2048, 1), load("b", 8192, 2048, 5)]) == "b"
    assert choose([load("a", 4096, 1024, 3), load("b", 4096, 1024, 1)]) == "b"
    assert choose([load("b", 4096, 0, 0), load("a", 4096, 0, 0)]) == "a"
    assert choose([load("a", 4096, 3584, 1)]) is None  # 512 MiB left, 1024 asked
    assert choose([]) is None
