"""The price table: what one vCPU-second, one GiB-second of memory and one GiB-hour of
saved state cost, in the operator's currency, and whether a vCPU-second is one allocated
while running (the default) or one actually used (the CPU time the sandbox's processes
took). Defaults are documented in docs/observability.md ("Usage and cost");
``BAC_PRICE_*`` replaces them."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from bac_server.store import Usage


class CpuCharge(enum.Enum):
    """What the vCPU-second price is charged on."""

    ALLOCATED = "allocated"  # each vCPU the sandbox has, for every second it runs
    USED = "used"  # the CPU time its processes used


@dataclass(frozen=True)
class PriceTable:
    vcpu_second: float = 0.000014
    memory_gib_second: float = 0.0000045
    storage_gib_hour: float = 0.0001
    currency: str = "USD"
    cpu: CpuCharge = CpuCharge.ALLOCATED

    def __post_init__(self) -> None:
        for name in ("vcpu_second", "memory_gib_second", "storage_gib_hour"):
            value = getattr(self, name)
            if not value >= 0 or value == float("inf"):
                raise ValueError(f"price {name} must be a finite number >= 0, not {value!r}")
        if not self.currency or len(self.currency) > 16:
            raise ValueError("the currency must be a short name such as USD")

    def cost(self, usage: Usage) -> float:
        cpu = usage.cpu_used_seconds if self.cpu is CpuCharge.USED else usage.vcpu_seconds
        return (cpu * self.vcpu_second
                + usage.memory_gib_seconds * self.memory_gib_second
                + usage.storage_gib_hours * self.storage_gib_hour)
