"""Resource usage samples: what :class:`MetricStore` keeps for ``GET
/sandboxes/{id}/metrics``, written by the sampler (``control.sandboxes.MetricsSampler``)
and pruned by age."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class MetricRecord:
    sandbox_id: str
    at: datetime
    cpu_count: int
    cpu_used_pct: float
    mem_used: int
    mem_total: int
    mem_cache: int
    disk_used: int
    disk_total: int


class MetricStore(Protocol):
    """Every method is one transaction."""

    async def add_metrics(self, samples: list[MetricRecord]) -> None: ...

    async def metrics(
        self, sandbox_id: str, start: datetime | None, end: datetime | None
    ) -> list[MetricRecord]:
        """The sandbox's samples in [start, end], oldest first."""
        ...

    async def prune_metrics(self, before: datetime) -> int:
        """Drop every sample older than ``before``; returns how many."""
        ...
