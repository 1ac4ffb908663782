"""``Costs``: the blocking twin of :class:`AsyncCosts`, method for method."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from datetime import date
from typing import Unpack

from bac._config import ConnectionOpts
from bac._costs import (
    AsyncCosts,
    CapAction,
    CapPeriod,
    CapScope,
    CostCap,
    SandboxUsage,
    UsageReport,
)
from bac._portal import PORTAL


async def _make(opts: ConnectionOpts) -> AsyncCosts:
    return AsyncCosts(**opts)


class Costs:
    """A team's usage, cost and cost caps, with blocking calls; see :class:`AsyncCosts`.

    ::

        with Costs() as costs:
            print(costs.usage(group_by="day").total.cost)
    """

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        # Made on the portal's loop, which is where its connection pool will be used.
        self._inner = PORTAL.run(_make(opts))

    def close(self) -> None:
        PORTAL.run(self._inner.aclose())

    def __enter__(self) -> Costs:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def usage(self, *, group_by: str = "sandbox", metadata: Mapping[str, str] | None = None,
              sandbox_id: str | None = None, since: date | str | None = None,
              until: date | str | None = None) -> UsageReport:
        return PORTAL.run(self._inner.usage(group_by=group_by, metadata=metadata,
                                            sandbox_id=sandbox_id, since=since, until=until))

    def sandbox_usage(self, sandbox_id: str) -> SandboxUsage:
        return PORTAL.run(self._inner.sandbox_usage(sandbox_id))

    def caps(self) -> builtins.list[CostCap]:
        return PORTAL.run(self._inner.caps())

    def cap(self, cap_id: str) -> CostCap:
        return PORTAL.run(self._inner.cap(cap_id))

    def create_cap(self, *, scope: CapScope, limit: float, period: CapPeriod = "total",
                   action: CapAction = "pause", sandbox_id: str | None = None,
                   metadata: Mapping[str, str] | None = None) -> CostCap:
        return PORTAL.run(self._inner.create_cap(scope=scope, limit=limit, period=period,
                                                 action=action, sandbox_id=sandbox_id,
                                                 metadata=metadata))

    def update_cap(self, cap_id: str, *, limit: float | None = None,
                   action: CapAction | None = None) -> CostCap:
        return PORTAL.run(self._inner.update_cap(cap_id, limit=limit, action=action))

    def delete_cap(self, cap_id: str) -> bool:
        return PORTAL.run(self._inner.delete_cap(cap_id))
