"""Cost caps: a limit on what one sandbox, a metadata group or a whole team may cost, over
its life (``total``), a UTC day or a UTC month.

Each cap's spending is kept in memory, started from the store when the cap is loaded (at
start-up, at creation) and charged with every amount the meter accrues for a sandbox it
covers; the meter accrues every ``check_s`` seconds (0.5 by default) on the plane's clock,
so a cap is acted on within that of being crossed. At 80 % a ``warning`` event (webhook
type ``bac.sandbox.warning``) goes to every live sandbox the cap covers, once per period.
At 100 % the cap's action runs on each running sandbox it covers: ``pause`` (the default:
all of them frozen at once by the kill switch's freeze, so spending stops within the tick
whatever their size, then written to disk with their memory in the background: nothing
lost) or ``kill``. A sandbox a cap paused is *held*: it
is not resumed (API, connect, traffic) while a cap covering it is reached (``CapReached``,
403); once the cap is raised, deleted or its period is over it resumes as any other. A
create the reached cap would cover is refused the same way. Which period a cap last
warned and acted in is stored, so a restart repeats neither.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import secrets
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bac_server.store import (
    CapAction,
    CapPeriod,
    CapRecord,
    SandboxStore,
    Usage,
    UsageQuery,
    UsageStore,
)

from ..clock import Clock, Scheduled
from ..errors import CapReached, InvalidRequest, NotFound
from ..keys import Team
from ..sandboxes import (
    CAP_HOLD,
    EndReason,
    EventKind,
    KillSwitch,
    Lifecycle,
    LiveSandbox,
    Registry,
    SandboxState,
    warning,
)
from ._meter import Meter, day_of
from ._prices import PriceTable

log = logging.getLogger(__name__)

WARN_AT = 0.8
MAX_CAPS_PER_TEAM = 100


def period_key(period: CapPeriod, at: datetime) -> str:
    if period == "day":
        return day_of(at)
    if period == "month":
        return at.strftime("%Y-%m")
    return "total"


@dataclass
class LiveCap:
    record: CapRecord
    period: str
    spent: float = 0.0

    @property
    def reached(self) -> bool:
        return self.spent >= self.record.amount

    def covers(self, sandbox_id: str, team_id: str, metadata: dict[str, str]) -> bool:
        cap = self.record
        if cap.team_id != team_id:
            return False
        if cap.scope == "sandbox":
            return cap.sandbox_id == sandbox_id
        if cap.scope == "group":
            return cap.metadata_key is not None and \
                metadata.get(cap.metadata_key) == cap.metadata_value
        return True

    def period_start(self) -> str | None:
        if self.record.period == "total":
            return None
        return self.period if self.record.period == "day" else self.period + "-01"


def _limit(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value <= 0:
        raise InvalidRequest(f"limit must be a number more than 0, got {value!r}")
    return float(value)


def _action(value: object) -> CapAction:
    if value not in ("pause", "kill"):
        raise InvalidRequest(f"action must be pause or kill, got {value!r}")
    return value


class CostCaps:
    def __init__(self, *, usage_store: UsageStore, sandbox_store: SandboxStore, meter: Meter,
                 prices: PriceTable, registry: Registry, lifecycle: Lifecycle, clock: Clock,
                 switch: KillSwitch, check_s: float = 0.5) -> None:
        """``switch``: what pauses the sandboxes a reached cap covers (frozen at once,
        written to disk after), with the hold ``cap``."""
        self._store = usage_store
        self._sandbox_store = sandbox_store
        self._meter = meter
        self._prices = prices
        self._registry = registry
        self._lifecycle = lifecycle
        self._switch = switch
        self._clock = clock
        self._check_s = check_s
        self._caps: dict[str, LiveCap] = {}
        # Whether reaching a cap acts here (warns, pauses, kills): with several replicas
        # only the leader's does; the others show the caps and refuse creates over one.
        self.acting = True
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: Scheduled | None = None
        meter.on_accrue(self._charge)

    # start / stop --------------------------------------------------------------------------
    async def start(self) -> None:
        self.acting = True
        await self.load()
        self._schedule()

    async def load(self) -> None:
        """Every cap as the store has it, its spending read again from the usage rows."""
        for record in await self._store.list_caps():
            await self._load(record)

    async def refresh(self, *, respend: bool) -> None:
        """Follow the caps other replicas made, changed or deleted (several replicas,
        docs/scale-out.md); ``respend``: read every cap's spending again too (a replica
        that does not meter: the leader's meter writes it)."""
        records = {r.cap_id: r for r in await self._store.list_caps()}
        for cap_id in [c for c in self._caps if c not in records]:
            del self._caps[cap_id]
        for cap_id, record in records.items():
            live = self._caps.get(cap_id)
            if live is None or respend:
                await self._load(record)
            elif record.updated_at > live.record.updated_at:
                live.record = record  # its limit or action changed through another replica
                self._check(live)

    def _schedule(self) -> None:
        self._timer = self._clock.call_at(
            self._clock.now() + timedelta(seconds=self._check_s), self._tick)

    def _tick(self) -> None:
        # Synchronous, and re-armed from itself: a simulated clock's move runs every tick
        # on the way, each at its own time.
        try:
            self._meter.tick()
        except Exception:
            log.exception("metering tick failed")
        self._schedule()

    async def settle(self) -> None:
        """Wait for the warnings and actions started so far (a simulation's step)."""
        while pending := set(self._tasks):
            await asyncio.gather(*pending, return_exceptions=True)

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await self.settle()

    async def _load(self, record: CapRecord) -> LiveCap:
        """Start the cap's spending from the store; amounts accrued meanwhile are charged
        as they come (``Meter.settled``)."""
        live = LiveCap(record, period_key(record.period, self._clock.now()))
        query = UsageQuery(team_id=record.team_id, group_by="team", since=live.period_start(),
                           sandbox_id=record.sandbox_id,
                           metadata={record.metadata_key: record.metadata_value or ""}
                           if record.metadata_key else {})

        def track() -> None:
            self._caps[record.cap_id] = live

        rows = await self._meter.settled(query, track)
        live.spent += self._prices.cost(Usage.total(u for _, u in rows))
        self._check(live)
        return live

    # charging ------------------------------------------------------------------------------
    def _roll(self, live: LiveCap, at: datetime) -> None:
        key = period_key(live.record.period, at)
        if key != live.period:
            live.period, live.spent = key, 0.0

    def _charge(self, sandbox_id: str, team_id: str, metadata: dict[str, str], usage: Usage,
                at: datetime) -> None:
        cost = self._prices.cost(usage)
        for live in self._caps.values():
            if live.covers(sandbox_id, team_id, metadata):
                self._roll(live, at)
                live.spent += cost
                self._check(live)

    def _check(self, live: LiveCap) -> None:
        if not self.acting:
            return
        cap = live.record
        if live.reached and cap.reached != live.period:
            live.record = dataclasses.replace(cap, reached=live.period, warned=live.period)
            self._spawn(self._act(live, warn=cap.warned != live.period))
        elif live.spent >= WARN_AT * cap.amount and cap.warned != live.period \
                and not live.reached:
            live.record = dataclasses.replace(cap, warned=live.period)
            self._spawn(self._warn(live))

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("acting on a cost cap failed")

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _covered(self, live: LiveCap) -> list[LiveSandbox]:
        return [s for s in self._registry.all()
                if live.covers(s.sandbox_id, s.team_id, s.metadata)]

    def _said(self, live: LiveCap) -> str:
        cap = live.record
        return (f"cost cap {cap.cap_id} ({self._scope_said(cap)}, {cap.period}) at "
                f"{live.spent:.6g} of {cap.amount:.6g} {self._prices.currency}")

    @staticmethod
    def _scope_said(cap: CapRecord) -> str:
        if cap.scope == "sandbox":
            return "this sandbox"
        if cap.scope == "group":
            return f"metadata {cap.metadata_key}={cap.metadata_value}"
        return "the team"

    def _fields(self, live: LiveCap) -> dict[str, str]:
        return {"cap_id": live.record.cap_id, "spent": f"{live.spent:.6f}",
                "limit": f"{live.record.amount:.6f}", "period": live.period,
                "currency": self._prices.currency}

    async def _warn(self, live: LiveCap) -> None:
        await self._store.update_cap(live.record)
        events = [warning(s.sandbox_id, s.team_id, f"{self._said(live)}: 80 % reached",
                          reason="cap", percent="80", **self._fields(live))
                  for s in self._covered(live)]
        if events:
            await self._sandbox_store.add_events(events)

    async def _act(self, live: LiveCap, *, warn: bool) -> None:
        if warn:
            await self._warn(live)
        else:
            await self._store.update_cap(live.record)
        said = f"{self._said(live)}: reached"
        covered = [s for s in self._covered(live) if s.state is SandboxState.RUNNING]
        if live.record.action == "pause" and self._switch.freezes and live.reached:
            # Frozen at once, all together, and held; written to disk in the background.
            await self._switch.freeze(
                covered, hold=CAP_HOLD, reason=EndReason.CAP,
                message=f"{said}: paused (frozen; its state is written to disk next)")
            return
        for sbx in covered:
            await self._enforce(live, sbx, said)

    async def _enforce(self, live: LiveCap, sbx: LiveSandbox, said: str) -> None:
        async with sbx.lock:
            if sbx.state is not SandboxState.RUNNING or not live.reached:
                return
            if live.record.action == "kill":
                await self._lifecycle.end(sbx, SandboxState.KILLED, EventKind.KILLED,
                                          f"{said}: killed", reason=EndReason.CAP)
                return
            # A backend without a freezer: the ordinary pause, with the lock held.
            sbx.held = CAP_HOLD  # written with the pause: nothing resumes it meanwhile
            try:
                await self._lifecycle.pausing.pause(
                    sbx, memory=True, kind=EventKind.PAUSED, message=f"{said}: paused")
            except BaseException:
                sbx.held = None
                raise

    # gates ---------------------------------------------------------------------------------
    def _reached(self, sandbox_id: str, team_id: str,
                 metadata: dict[str, str]) -> LiveCap | None:
        now = self._clock.now()
        for live in self._caps.values():
            if live.covers(sandbox_id, team_id, metadata):
                self._roll(live, now)
                if live.reached:
                    return live
        return None

    def admit(self, team: Team, metadata: dict[str, str]) -> None:
        """Refuse a create that a reached cap of the team would cover."""
        live = self._reached("", team.team_id, metadata)
        if live is not None:
            raise CapReached(f"{self._said(live)} is reached: no sandbox it covers is "
                             "created until it is raised, deleted or its period ends")

    def release(self, sbx: LiveSandbox) -> None:
        """Let a sandbox a cap paused resume, if no cap covering it is reached now."""
        live = self._reached(sbx.sandbox_id, sbx.team_id, sbx.metadata)
        if live is not None:
            raise CapReached(f"sandbox {sbx.sandbox_id!r} is paused by {self._said(live)}: "
                             "it resumes once the cap is raised, deleted or its period ends")
        sbx.held = None

    # the API's operations ------------------------------------------------------------------
    async def create(self, team: Team, *, scope: str, limit: object, period: str = "total",
                     action: object = "pause", sandbox_id: str | None = None,
                     metadata: dict[str, str] | None = None) -> LiveCap:
        if scope not in ("sandbox", "group", "team"):
            raise InvalidRequest(f"scope must be sandbox, group or team, got {scope!r}")
        if period not in ("total", "day", "month"):
            raise InvalidRequest(f"period must be total, day or month, got {period!r}")
        if scope == "team" and period == "total":
            raise InvalidRequest("a team's cap is per day or per month (period day|month)")
        key = value = None
        if scope == "sandbox":
            if not sandbox_id:
                raise InvalidRequest("a sandbox's cap needs its sandboxID")
            self._registry.owned(team, sandbox_id, activity=False)
        elif sandbox_id:
            raise InvalidRequest(f"sandboxID is for a sandbox's cap, not a {scope}'s")
        if scope == "group":
            if not metadata or len(metadata) != 1:
                raise InvalidRequest("a group's cap needs exactly one metadata pair")
            ((key, value),) = metadata.items()
        elif metadata:
            raise InvalidRequest(f"metadata is for a group's cap, not a {scope}'s")
        now = self._clock.now()
        record = CapRecord(
            cap_id="cap_" + secrets.token_hex(8), team_id=team.team_id,
            scope=scope,  # type: ignore[arg-type]
            period=period,  # type: ignore[arg-type]
            amount=_limit(limit), action=_action(action), created_at=now, updated_at=now,
            sandbox_id=sandbox_id if scope == "sandbox" else None, metadata_key=key,
            metadata_value=value)
        if not await self._store.insert_cap(record, max_per_team=MAX_CAPS_PER_TEAM):
            raise InvalidRequest(f"a team may have {MAX_CAPS_PER_TEAM} cost caps")
        return await self._load(record)

    def of_team(self, team: Team) -> list[LiveCap]:
        now = self._clock.now()
        found = [c for c in self._caps.values() if c.record.team_id == team.team_id]
        for live in found:
            self._roll(live, now)
        return sorted(found, key=lambda c: (c.record.created_at, c.record.cap_id))

    def get(self, team: Team, cap_id: str) -> LiveCap:
        live = self._caps.get(cap_id)
        if live is None or live.record.team_id != team.team_id:
            raise NotFound(f"cost cap {cap_id!r} not found")
        self._roll(live, self._clock.now())
        return live

    def covering(self, team: Team, sandbox_id: str, metadata: dict[str, str]) -> list[LiveCap]:
        return [c for c in self.of_team(team) if c.covers(sandbox_id, team.team_id, metadata)]

    async def update(self, team: Team, cap_id: str, *, limit: object = None,
                     action: object = None) -> LiveCap:
        live = self.get(team, cap_id)
        changes: dict[str, object] = {"updated_at": self._clock.now()}
        if limit is not None:
            changes["amount"] = _limit(limit)
        if action is not None:
            changes["action"] = _action(action)
        record = dataclasses.replace(live.record, **changes)  # type: ignore[arg-type]
        if record.amount > live.spent:
            # Below its new limit: it may warn and act again in this period.
            record = dataclasses.replace(
                record, reached=None,
                warned=None if live.spent < WARN_AT * record.amount else record.warned)
        live.record = record
        await self._store.update_cap(record)
        self._check(live)
        return live

    async def delete(self, team: Team, cap_id: str) -> None:
        self.get(team, cap_id)
        del self._caps[cap_id]
        await self._store.delete_cap(team.team_id, cap_id)
