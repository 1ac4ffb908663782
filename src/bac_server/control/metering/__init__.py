"""Usage, cost and cost caps: the meter that accrues what sandboxes are allocated and keep,
the price table that turns it into money, and the caps that stop sandboxes at a limit
(docs/observability.md, "Usage and cost", "Cost caps")."""

from ._caps import CostCaps, LiveCap
from ._meter import Meter, day_of
from ._prices import CpuCharge, PriceTable
from ._report import UsageLine, UsageReport, UsageReports

__all__ = ["CostCaps", "CpuCharge", "LiveCap", "Meter", "PriceTable", "UsageLine",
           "UsageReport", "UsageReports", "day_of"]
