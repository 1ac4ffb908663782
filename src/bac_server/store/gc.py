"""What the collection of template storage asks the store: which built templates something
can still start from, and forgetting the pins nothing needs any more (``control.gc``,
the template services' start-up). Both questions span the sandbox, checkpoint, build, tag
and pin tables, which is why they are the store's and not any one record's."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol


class GcStore(Protocol):
    """Every method is one transaction."""

    async def live_digests(self, live_states: Collection[str]) -> set[str]:
        """Manifest digests something can still start from: those of ready builds a tag
        points at, and those sandboxes are pinned to while the sandbox is in one of
        ``live_states``, has a checkpoint or snapshot, or has no row yet (a create in
        flight pins before it inserts)."""
        ...

    async def prune_pins(self, live_states: Collection[str]) -> int:
        """Forget the pins of sandboxes in none of ``live_states`` and with no checkpoint."""
        ...
