"""``AsyncCosts``: what a team's sandboxes used and cost, and the caps that bound the cost.

::

    async with AsyncCosts() as costs:                   # BAC_API_KEY / BAC_API_URL
        report = await costs.usage(group_by="metadata.run_id", since="2026-12-01")
        for group in report.groups:
            print(group.key, group.cost, report.currency)
        cap = await costs.create_cap(scope="group", metadata={"run_id": "r-42"},
                                     limit=5.0, action="pause")

Usage is resource quantities (vCPU-seconds, GiB-seconds of memory, GiB-hours of saved
state, CPU-seconds used) and their cost under the server's price table; days are UTC
calendar days. A cap bounds the cost of one sandbox, of the sandboxes whose metadata holds a
pair, or of the whole team, over its period (``total``, ``day``, ``month``); reached, it
pauses or kills what it covers and refuses creates it would cover (``CapReachedError``).
Arguments are checked before any request (``InvalidArgumentError``); an answer that is not
the documented shape is a ``ServerError``.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal, Unpack, cast, get_args
from urllib.parse import quote

import httpx

from bac import _errors as e
from bac._api import ApiClient
from bac._config import ConnectionConfig, ConnectionOpts
from bac._lifecycle import sandbox_path

CapScope = Literal["sandbox", "group", "team"]
CapPeriod = Literal["total", "day", "month"]
CapAction = Literal["pause", "kill"]
CapState = Literal["ok", "warned", "reached"]
GROUP_BYS = ("sandbox", "team", "day")  # and "metadata.<key>"


# -- reading the server's answers, strictly ------------------------------------------------

def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise e.ServerError(f"the server sent {what} that is not an object")
    return value


def _field(body: dict[str, Any], key: str, what: str) -> Any:
    try:
        return body[key]
    except KeyError:
        raise e.ServerError(f"the server sent {what} without {key!r}") from None


def _number(body: dict[str, Any], key: str, what: str) -> float:
    value = _field(body, key, what)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise e.ServerError(f"the server sent {what} whose {key!r} is not a number: {value!r}")
    return float(value)


def _text(body: dict[str, Any], key: str, what: str) -> str:
    value = _field(body, key, what)
    if not isinstance(value, str):
        raise e.ServerError(f"the server sent {what} whose {key!r} is not a string: {value!r}")
    return value


def _choice(body: dict[str, Any], key: str, what: str, allowed: tuple[str, ...]) -> str:
    value = _text(body, key, what)
    if value not in allowed:
        raise e.ServerError(f"the server sent {what} whose {key!r} is {value!r}, not one of "
                            f"{', '.join(allowed)}")
    return value


def _day(body: dict[str, Any], key: str, what: str) -> date:
    value = _text(body, key, what)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise e.ServerError(f"the server sent {what} whose {key!r} is not a day: "
                            f"{value!r}") from None


def _moment(body: dict[str, Any], key: str, what: str) -> datetime:
    value = _text(body, key, what)
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise e.ServerError(f"the server sent {what} whose {key!r} is not a time: "
                            f"{value!r}") from None


def _list(value: Any, what: str) -> builtins.list[Any]:
    if not isinstance(value, list):
        raise e.ServerError(f"the server's {what} is not a list")
    return value


@dataclass(frozen=True)
class Usage:
    """Resource quantities and their cost: vCPU-seconds and GiB-seconds of memory allocated
    while running, GiB-hours of saved state on disk, CPU-seconds actually used. ``key`` names
    a report's group (a sandbox id, team id, day, or metadata value, ``""`` for sandboxes
    without that key); None for a total."""

    vcpu_seconds: float
    memory_gib_seconds: float
    storage_gib_hours: float
    cpu_used_seconds: float
    cost: float
    key: str | None = None

    @classmethod
    def from_api(cls, item: Any, *, keyed: bool = False) -> Usage:
        what = "a usage group" if keyed else "a usage figure"
        body = _object(item, what)
        return cls(vcpu_seconds=_number(body, "vcpuSeconds", what),
                   memory_gib_seconds=_number(body, "memoryGibSeconds", what),
                   storage_gib_hours=_number(body, "storageGibHours", what),
                   cpu_used_seconds=_number(body, "cpuUsedSeconds", what),
                   cost=_number(body, "cost", what),
                   key=_text(body, "key", what) if keyed else None)


@dataclass(frozen=True)
class Prices:
    """The server's price table: per vCPU-second, GiB-second of memory and GiB-hour of
    storage; ``cpu`` says whether vCPU time is charged as ``allocated`` or ``used``."""

    vcpu_second: float
    memory_gib_second: float
    storage_gib_hour: float
    cpu: Literal["allocated", "used"]

    @classmethod
    def from_api(cls, item: Any) -> Prices:
        what = "a price table"
        body = _object(item, what)
        return cls(vcpu_second=_number(body, "vcpuSecond", what),
                   memory_gib_second=_number(body, "memoryGibSecond", what),
                   storage_gib_hour=_number(body, "storageGibHour", what),
                   cpu=cast(Literal["allocated", "used"],
                            _choice(body, "cpu", what, ("allocated", "used"))))


@dataclass(frozen=True)
class UsageReport:
    """A team's usage over the days ``since``..``until`` (inclusive): the total and one
    :class:`Usage` per group, most costly first."""

    currency: str
    prices: Prices
    since: date
    until: date
    total: Usage
    groups: builtins.list[Usage]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_api(cls, item: Any) -> UsageReport:
        what = "a usage report"
        body = _object(item, what)
        return cls(currency=_text(body, "currency", what),
                   prices=Prices.from_api(_field(body, "prices", what)),
                   since=_day(body, "since", what), until=_day(body, "until", what),
                   total=Usage.from_api(_field(body, "total", what)),
                   groups=[Usage.from_api(g, keyed=True)
                           for g in _list(_field(body, "groups", what), "usage group list")],
                   raw=body)


@dataclass(frozen=True)
class CostCap:
    """A cap on the cost of one sandbox (``sandbox_id``), of a metadata group
    (``metadata``) or of the whole team, over its ``period``: ``spent`` of ``limit`` so far in
    the current one (which began on ``period_start``; None for ``total``). At 80 % its
    ``state`` is ``warned``; at 100 % ``reached``, and ``action`` was taken."""

    cap_id: str
    scope: CapScope
    sandbox_id: str | None
    metadata: dict[str, str] | None
    period: CapPeriod
    limit: float
    action: CapAction
    spent: float
    period_start: date | None
    state: CapState
    created_at: datetime
    updated_at: datetime
    raw: dict[str, Any] = field(repr=False)

    @property
    def reached(self) -> bool:
        return self.state == "reached"

    @classmethod
    def from_api(cls, item: Any) -> CostCap:
        what = "a cost cap"
        body = _object(item, what)
        sandbox_id = _field(body, "sandboxID", what)
        if sandbox_id is not None and not isinstance(sandbox_id, str):
            raise e.ServerError(f"the server sent {what} whose 'sandboxID' is {sandbox_id!r}")
        metadata = _field(body, "metadata", what)
        if metadata is not None and not (
                isinstance(metadata, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
            raise e.ServerError(f"the server sent {what} whose 'metadata' is {metadata!r}")
        return cls(cap_id=_text(body, "capID", what),
                   scope=cast(CapScope, _choice(body, "scope", what, get_args(CapScope))),
                   sandbox_id=sandbox_id, metadata=metadata,
                   period=cast(CapPeriod, _choice(body, "period", what, get_args(CapPeriod))),
                   limit=_number(body, "limit", what),
                   action=cast(CapAction, _choice(body, "action", what, get_args(CapAction))),
                   spent=_number(body, "spent", what),
                   period_start=(None if _field(body, "periodStart", what) is None
                                 else _day(body, "periodStart", what)),
                   state=cast(CapState, _choice(body, "state", what, get_args(CapState))),
                   created_at=_moment(body, "createdAt", what),
                   updated_at=_moment(body, "updatedAt", what), raw=body)


@dataclass(frozen=True)
class SandboxUsage:
    """One sandbox's usage over its whole life so far, and every cap that covers it (its
    own, its metadata groups', its team's)."""

    sandbox_id: str
    currency: str
    usage: Usage
    caps: builtins.list[CostCap]
    raw: dict[str, Any] = field(repr=False)

    @property
    def cost(self) -> float:
        return self.usage.cost

    @classmethod
    def from_api(cls, item: Any) -> SandboxUsage:
        what = "a sandbox's usage"
        body = _object(item, what)
        return cls(sandbox_id=_text(body, "sandboxID", what),
                   currency=_text(body, "currency", what), usage=Usage.from_api(body),
                   caps=[CostCap.from_api(c)
                         for c in _list(_field(body, "caps", what), "cap list")],
                   raw=body)


# -- checking the caller's arguments -------------------------------------------------------

def _limit(limit: Any) -> float:
    if isinstance(limit, bool) or not isinstance(limit, int | float) \
            or not math.isfinite(limit) or limit <= 0:
        raise e.InvalidArgumentError(f"a cap's limit must be a number above 0, got {limit!r}")
    return float(limit)


def _action(action: Any) -> CapAction:
    if action not in get_args(CapAction):
        raise e.InvalidArgumentError(f"a cap's action must be 'pause' or 'kill', got {action!r}")
    return cast(CapAction, action)


def _pairs(metadata: Mapping[str, str], what: str) -> dict[str, str]:
    pairs = dict(metadata)
    for key, value in pairs.items():
        if not isinstance(key, str) or not key or ":" in key or not isinstance(value, str):
            raise e.InvalidArgumentError(
                f"{what} must map non-empty keys without ':' to strings, got {key!r}: "
                f"{value!r}")
    return pairs


def _wire_day(value: date | str | None, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        raise e.InvalidArgumentError(f"{what} is a day (a date or 'YYYY-MM-DD'), not a time")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str) and len(value) == len("YYYY-MM-DD"):
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise e.InvalidArgumentError(f"{what} must be a date or 'YYYY-MM-DD', got {value!r}")


def _cap_path(cap_id: str) -> str:
    if not isinstance(cap_id, str) or not cap_id:
        raise e.InvalidArgumentError(f"invalid cap id {cap_id!r}")
    return f"/caps/{quote(cap_id, safe='')}"


def cost_cap_body(limit: float | None, action: CapAction | None) -> dict[str, Any]:
    """The create request's ``costCap`` field (a sandbox cap, period total), or nothing."""
    if limit is None:
        if action is not None:
            raise e.InvalidArgumentError("cost_cap_action needs cost_cap (the cap's limit)")
        return {}
    cap: dict[str, Any] = {"limit": _limit(limit)}
    if action is not None:
        cap["action"] = _action(action)
    return {"costCap": cap}


def usage_params(group_by: str, metadata: Mapping[str, str] | None, sandbox_id: str | None,
                 since: date | str | None, until: date | str | None) -> httpx.QueryParams:
    """``GET /usage``'s query for these arguments, each checked."""
    if group_by not in GROUP_BYS and not (
            group_by.startswith("metadata.") and group_by != "metadata."):
        raise e.InvalidArgumentError("group_by must be 'sandbox', 'team', 'day' or "
                                     f"'metadata.<key>', got {group_by!r}")
    first, last = _wire_day(since, "since"), _wire_day(until, "until")
    if first is not None and last is not None and first > last:
        raise e.InvalidArgumentError(f"since ({first}) is after until ({last})")
    params: dict[str, Any] = {"groupBy": group_by}
    if metadata:
        pairs = _pairs(metadata, "metadata")
        if any("," in k + v for k, v in pairs.items()):  # the query splits pairs on commas
            raise e.InvalidArgumentError(f"metadata to match cannot hold ',': {pairs!r}")
        params["metadata"] = [f"{k}:{v}" for k, v in pairs.items()]
    if sandbox_id is not None:
        sandbox_path(sandbox_id)  # the same check as every sandbox route's
        params["sandboxID"] = sandbox_id
    if first is not None:
        params["since"] = first
    if last is not None:
        params["until"] = last
    return httpx.QueryParams(params)


def cap_create_body(scope: CapScope, limit: float, period: CapPeriod, action: CapAction,
                    sandbox_id: str | None,
                    metadata: Mapping[str, str] | None) -> dict[str, Any]:
    """``POST /caps``'s body for these arguments, each checked."""
    if scope not in get_args(CapScope):
        raise e.InvalidArgumentError(
            f"a cap's scope must be 'sandbox', 'group' or 'team', got {scope!r}")
    if period not in get_args(CapPeriod):
        raise e.InvalidArgumentError(
            f"a cap's period must be 'total', 'day' or 'month', got {period!r}")
    body: dict[str, Any] = {"scope": scope, "period": period, "limit": _limit(limit),
                            "action": _action(action)}
    if (sandbox_id is not None) != (scope == "sandbox"):
        raise e.InvalidArgumentError(
            "a 'sandbox' cap needs sandbox_id" if scope == "sandbox"
            else f"sandbox_id is for a 'sandbox' cap, not a {scope!r} one")
    if bool(metadata) != (scope == "group"):
        raise e.InvalidArgumentError(
            "a 'group' cap needs metadata (the pair its sandboxes hold)" if scope == "group"
            else f"metadata is for a 'group' cap, not a {scope!r} one")
    if scope == "team" and period == "total":
        raise e.InvalidArgumentError("a team cap's period must be 'day' or 'month'")
    if sandbox_id is not None:
        sandbox_path(sandbox_id)
        body["sandboxID"] = sandbox_id
    if metadata:
        pairs = _pairs(metadata, "a group cap's metadata")
        if len(pairs) != 1:
            raise e.InvalidArgumentError(f"a group cap is on exactly one metadata pair, got "
                                         f"{pairs!r}")
        body["metadata"] = pairs
    return body


# -- the calls -------------------------------------------------------------------------------

async def sandbox_usage(api: ApiClient, sandbox_id: str) -> SandboxUsage:
    data = await api.json("GET", sandbox_path(sandbox_id, "/usage"),
                          not_found=e.SandboxNotFoundError)
    return SandboxUsage.from_api(data)


class AsyncCosts:
    """The usage, cost and cost caps of one team (its API key) on one Bac server."""

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        self._api = ApiClient(ConnectionConfig.resolve(**opts))

    async def aclose(self) -> None:
        await self._api.aclose()

    async def __aenter__(self) -> AsyncCosts:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def usage(self, *, group_by: str = "sandbox",
                    metadata: Mapping[str, str] | None = None, sandbox_id: str | None = None,
                    since: date | str | None = None,
                    until: date | str | None = None) -> UsageReport:
        """The team's usage over the days ``since``..``until`` (inclusive; the server's
        default is this month up to today), of the sandboxes whose metadata holds every pair
        of ``metadata`` (or of ``sandbox_id``), per ``group_by``: ``sandbox``, ``team``,
        ``day`` or ``metadata.<key>`` (per value of that key)."""
        params = usage_params(group_by, metadata, sandbox_id, since, until)
        return UsageReport.from_api(await self._api.json("GET", "/usage", params=params))

    async def sandbox_usage(self, sandbox_id: str) -> SandboxUsage:
        """One sandbox's usage over its life so far, ended or not, and the caps covering it
        (``SandboxNotFoundError`` if it is not the team's)."""
        return await sandbox_usage(self._api, sandbox_id)

    async def caps(self) -> builtins.list[CostCap]:
        """The team's caps."""
        data = await self._api.json("GET", "/caps")
        return [CostCap.from_api(c) for c in _list(data, "cap list")]

    async def cap(self, cap_id: str) -> CostCap:
        """One cap (``NotFoundError`` if the team has none of that id)."""
        return CostCap.from_api(await self._api.json("GET", _cap_path(cap_id)))

    async def create_cap(self, *, scope: CapScope, limit: float, period: CapPeriod = "total",
                         action: CapAction = "pause", sandbox_id: str | None = None,
                         metadata: Mapping[str, str] | None = None) -> CostCap:
        """Cap the cost of one sandbox (``scope="sandbox"``, ``sandbox_id``), of the
        sandboxes whose metadata holds the one pair of ``metadata`` (``scope="group"``) or of
        the team (``scope="team"``, period ``day`` or ``month``) at ``limit`` per ``period``;
        reached, ``action`` pauses (held until the cap is raised or deleted) or kills them."""
        body = cap_create_body(scope, limit, period, action, sandbox_id, metadata)
        data = await self._api.json("POST", "/caps", ok=(201,), json=body,
                                    not_found=e.SandboxNotFoundError)
        return CostCap.from_api(data)

    async def update_cap(self, cap_id: str, *, limit: float | None = None,
                         action: CapAction | None = None) -> CostCap:
        """Change a cap's limit or action; a limit raised above what is spent releases the
        sandboxes the cap held paused (they may be resumed again)."""
        path = _cap_path(cap_id)
        if limit is None and action is None:
            raise e.InvalidArgumentError("update_cap needs a limit or an action to change")
        body: dict[str, Any] = {}
        if limit is not None:
            body["limit"] = _limit(limit)
        if action is not None:
            body["action"] = _action(action)
        return CostCap.from_api(await self._api.json("PATCH", path, json=body))

    async def delete_cap(self, cap_id: str) -> bool:
        """Delete a cap, releasing what it held; False when the team has none of that id."""
        path = _cap_path(cap_id)
        try:
            await self._api.request("DELETE", path, ok=(200, 204))
        except e.NotFoundError:
            return False
        return True
