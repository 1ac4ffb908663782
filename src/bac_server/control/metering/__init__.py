"""Usage and cost: the meter that accrues what sandboxes are allocated and keep, and the
price table that turns it into money (docs/observability.md, "Usage and cost")."""

from ._meter import Meter, day_of
from ._prices import PriceTable
from ._report import UsageLine, UsageReport, UsageReports

__all__ = ["Meter", "PriceTable", "UsageLine", "UsageReport", "UsageReports", "day_of"]
