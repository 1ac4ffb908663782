"""Node agents and what is placed on them (docs/scale-out.md).

A node agent (``bac node``) registers its row at start and beats every few seconds; an API
replica places each sandbox (and knows where each checkpoint lies) through a row here,
so any replica finds the node that holds a sandbox, and two replicas placing at once
never overfill a node: :meth:`NodeStore.place` chooses and inserts under one lock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


class NodeState(enum.Enum):
    ACTIVE = "active"  # beating: new sandboxes may be placed on it
    DRAINING = "draining"  # beating, keeps its sandboxes, takes no new ones
    LOST = "lost"  # its beats stopped: its sandboxes are reported lost, never moved


class PlacedKind(enum.Enum):
    SANDBOX = "sandbox"
    CHECKPOINT = "checkpoint"
    VOLUME = "volume"


@dataclass(frozen=True)
class NodeRecord:
    node_id: str
    address: str  # the host API replicas reach it at
    rpc_port: int
    tunnel_port: int
    vcpus: int  # what it offers
    memory_mb: int
    state: NodeState
    heartbeat_at: datetime
    started_at: datetime
    version: str
    sandboxes: int = 0  # how many it held at its last beat


@dataclass(frozen=True)
class Placement:
    """A sandbox (with what it was given) or a checkpoint, on its node."""

    object_id: str
    kind: PlacedKind
    node_id: str
    vcpus: int = 0
    memory_mb: int = 0


@dataclass(frozen=True)
class NodeLoad:
    """A node that may take a sandbox now, with what its sandboxes were given."""

    node: NodeRecord
    vcpus_placed: int
    memory_mb_placed: int
    sandboxes_placed: int


# Picks the node (its id) among those that may take the sandbox, or None: none fits.
Chooser = Callable[[Sequence[NodeLoad]], str | None]


class NodeStore(Protocol):
    """Every method is one transaction."""

    async def register_node(self, node: NodeRecord) -> None:
        """Insert or replace the node's row (a restarted node is the same node)."""
        ...

    async def beat(self, node_id: str, at: datetime, sandboxes: int) -> NodeState | None:
        """Its heartbeat: a lost node beating again is active again. Returns its state
        before the beat; None when it has no row (it must register again)."""
        ...

    async def list_nodes(self) -> list[NodeRecord]: ...

    async def set_node_state(self, node_id: str, state: NodeState) -> bool: ...

    async def mark_lost(self, silent_since: datetime) -> list[str]:
        """Every node not lost whose last beat is older than ``silent_since`` becomes
        lost; returns those that changed (idempotent: replicas doing it together agree)."""
        ...

    async def place(self, placement: Placement, choose: Chooser,
                    fresh_since: datetime, *, moving_from: str | None = None) -> str | None:
        """Under the nodes' lock: the active nodes beating since ``fresh_since``, each
        with what is placed on it, to ``choose``; the placement inserted on the node it
        picks, returned (None: it picked none, nothing inserted). ``moving_from``: the
        object is placed on that node now, and moves only if it still is (None, nothing
        changed, if another move or a removal came first)."""
        ...

    async def loads(self, fresh_since: datetime) -> list[NodeLoad]:
        """What ``place`` would offer its chooser now (read without its lock: a guess)."""
        ...

    async def record_placement(self, placement: Placement) -> None:
        """Insert or replace it (a checkpoint taken on its sandbox's node)."""
        ...

    async def placement(self, object_id: str) -> Placement | None: ...

    async def placements(self, node_id: str | None = None) -> list[Placement]: ...

    async def unplace(self, object_id: str) -> None:
        """Idempotent."""
        ...
