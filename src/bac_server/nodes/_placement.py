"""Which node takes a new sandbox.

Memory is what a node runs out of first (CPU is shared and may be oversubscribed), so a
node may take a sandbox while what its sandboxes were given, this one included, fits in
the memory it offers; among those the one with the most memory left takes it (spread:
a fleet's load stays even and one node lost takes the fewest sandboxes with it), then
the one with the fewest sandboxes, then by id (the same answer on every replica).
"""

from __future__ import annotations

from collections.abc import Sequence

from bac_server.store import Chooser, NodeLoad


def spread(memory_mb: int) -> Chooser:
    """A chooser (``store.Chooser``) for a sandbox given ``memory_mb``."""

    def choose(loads: Sequence[NodeLoad]) -> str | None:
        fits = [n for n in loads if n.memory_mb_placed + memory_mb <= n.node.memory_mb]
        if not fits:
            return None
        best = min(fits, key=lambda n: (-(n.node.memory_mb - n.memory_mb_placed),
                                        n.sandboxes_placed, n.node.node_id))
        return best.node.node_id

    return choose
