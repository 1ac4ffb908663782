"""What each sandbox was allocated and used, per UTC day, and the teams' cost caps.

Usage is kept per (sandbox, day): the meter (``control.metering``) adds what accrued since
its last write, so a team's day or month, a metadata group's total and a sandbox's lifetime
are sums over these rows, and nothing is lost when a sandbox ends. Each row also says up to
when its sandbox was metered, so a restarted server charges the time it was down to the
sandboxes that kept running through it. Amounts are resource quantities, never money: a
price table applied when read turns them into a cost, so a price change is not a migration.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol


@dataclass(frozen=True)
class Usage:
    """Resource quantities: vCPU-seconds and GiB-seconds of memory allocated while running,
    GiB-hours of saved state kept on disk (pauses, checkpoints), CPU-seconds used."""

    vcpu_seconds: float = 0.0
    memory_gib_seconds: float = 0.0
    storage_gib_hours: float = 0.0
    cpu_used_seconds: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.vcpu_seconds + other.vcpu_seconds,
                     self.memory_gib_seconds + other.memory_gib_seconds,
                     self.storage_gib_hours + other.storage_gib_hours,
                     self.cpu_used_seconds + other.cpu_used_seconds)

    @staticmethod
    def total(parts: Iterable[Usage]) -> Usage:
        return sum(parts, Usage())

    @property
    def empty(self) -> bool:
        return not (self.vcpu_seconds or self.memory_gib_seconds or self.storage_gib_hours
                    or self.cpu_used_seconds)


@dataclass(frozen=True)
class UsageDelta:
    """Usage to add to one sandbox's row of one day, metered up to ``metered_until``."""

    sandbox_id: str
    team_id: str
    day: str  # YYYY-MM-DD, UTC
    usage: Usage
    metered_until: datetime
    # The sandbox's CPU counter (seconds) as read at ``metered_until``; None: not read.
    cpu_mark: float | None = None


@dataclass(frozen=True)
class MeterMark:
    """Where the meter left a sandbox: up to when it was metered, and its CPU counter
    then (None: not read)."""

    until: datetime
    cpu_mark: float | None = None


GroupBy = Literal["sandbox", "team", "day", "metadata"]


@dataclass(frozen=True)
class UsageQuery:
    """One team's usage over the days ``since``..``until`` (inclusive, None: open), of one
    sandbox or of those whose metadata holds every ``metadata`` pair, summed per
    ``group_by`` (``metadata``: per value of ``group_key``)."""

    team_id: str
    group_by: GroupBy = "sandbox"
    group_key: str = ""
    since: str | None = None
    until: str | None = None
    sandbox_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


CapScope = Literal["sandbox", "group", "team"]
CapPeriod = Literal["total", "day", "month"]
CapAction = Literal["pause", "kill"]


@dataclass(frozen=True)
class CapRecord:
    """A cost cap: ``amount`` in the price table's currency over its ``period``, on one
    sandbox, a metadata group (``metadata_key`` = ``metadata_value``) or the whole team.
    ``warned`` and ``reached`` name the period (``total``, a day, a month) in which its
    80 % warning was sent and its action taken, so neither repeats after a restart."""

    cap_id: str
    team_id: str
    scope: CapScope
    period: CapPeriod
    amount: float
    action: CapAction
    created_at: datetime
    updated_at: datetime
    sandbox_id: str | None = None
    metadata_key: str | None = None
    metadata_value: str | None = None
    warned: str | None = None
    reached: str | None = None


class UsageStore(Protocol):
    async def add_usage(self, deltas: Sequence[UsageDelta]) -> None:
        """Add each delta to its (sandbox, day) row, all in one transaction."""
        ...

    async def usage(self, query: UsageQuery) -> list[tuple[str, Usage]]:
        """The sums the query asks for, one per group key (a sandbox id, team id, day or
        metadata value: "" for sandboxes without that key)."""
        ...

    async def meter_marks(self, sandbox_ids: Collection[str]) -> dict[str, MeterMark]:
        """Where the meter left each sandbox (of those with any usage): its latest row's
        ``metered_until`` and CPU counter."""
        ...

    async def insert_cap(self, cap: CapRecord, *, max_per_team: int) -> bool:
        """False (nothing written) when the team has ``max_per_team`` caps already."""
        ...

    async def get_cap(self, team_id: str, cap_id: str) -> CapRecord | None: ...

    async def list_caps(self, team_id: str | None = None) -> list[CapRecord]:
        """One team's caps, or (None) every team's, oldest first."""
        ...

    async def update_cap(self, cap: CapRecord) -> bool:
        """Replace the cap's amount, action, warned, reached and updated_at."""
        ...

    async def delete_cap(self, team_id: str, cap_id: str) -> bool: ...
