"""Usage, cost and caps in the SDK: the server's answers parsed strictly into typed values,
and every argument checked before a request is sent (pointed at a closed port, a request
would fail as unreachable instead)."""

from __future__ import annotations

import copy
import socket
from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

import pytest

import bac
from bac import AsyncCosts, ConnectionOpts, CostCap, SandboxUsage, Usage, UsageReport
from bac import _errors as e
from bac._costs import cap_create_body, cost_cap_body, usage_params

FIGURE = {"vcpuSeconds": 120.0, "memoryGibSeconds": 60, "storageGibHours": 0.5,
          "cpuUsedSeconds": 3.25, "cost": 0.00201}
REPORT = {
    "currency": "USD",
    "prices": {"vcpuSecond": 0.000014, "memoryGibSecond": 0.0000045, "storageGibHour": 0.0001,
               "cpu": "allocated"},
    "since": "2026-12-01", "until": "2026-12-02",
    "total": FIGURE,
    "groups": [{"key": "sbx1", **FIGURE}, {"key": "", **FIGURE, "cost": 0.0}],
}
CAP = {"capID": "cap_abc123", "scope": "group", "sandboxID": None,
       "metadata": {"run_id": "r-42"}, "period": "day", "limit": 5, "action": "pause",
       "spent": 4.1, "periodStart": "2026-12-02", "state": "warned",
       "createdAt": "2026-12-02T10:00:00Z", "updatedAt": "2026-12-02T10:05:00.5+00:00"}


def test_usage_report_is_parsed_into_types() -> None:
    """Every number is a float, days are dates, groups keep their keys, totals have none."""
    report = UsageReport.from_api(REPORT)
    assert report.currency == "USD"
    assert report.prices.cpu == "allocated" and report.prices.vcpu_second == 0.000014
    assert (report.since, report.until) == (date(2026, 12, 1), date(2026, 12, 2))
    assert report.total == Usage(120.0, 60.0, 0.5, 3.25, 0.00201, key=None)
    assert isinstance(report.total.memory_gib_seconds, float)
    assert [g.key for g in report.groups] == ["sbx1", ""]
    assert report.raw is REPORT


def test_cap_view_is_parsed_into_types() -> None:
    """A cap's enums, days and times come out typed; total caps have no period start."""
    cap = CostCap.from_api(CAP)
    assert (cap.cap_id, cap.scope, cap.period, cap.action, cap.state) == (
        "cap_abc123", "group", "day", "pause", "warned")
    assert cap.metadata == {"run_id": "r-42"} and cap.sandbox_id is None
    assert (cap.limit, cap.spent) == (5.0, 4.1) and not cap.reached
    assert cap.period_start == date(2026, 12, 2)
    assert cap.created_at == datetime.fromisoformat("2026-12-02T10:00:00+00:00")
    assert cap.updated_at.microsecond == 500000
    total = CostCap.from_api({**CAP, "scope": "sandbox", "sandboxID": "sbx1", "metadata": None,
                              "period": "total", "periodStart": None, "state": "reached"})
    assert total.period_start is None and total.reached and total.sandbox_id == "sbx1"
    with pytest.raises(e.ServerError):
        CostCap.from_api([CAP])


def test_sandbox_usage_carries_its_caps() -> None:
    body = {"sandboxID": "sbx1", "currency": "EUR", **FIGURE, "caps": [CAP]}
    found = SandboxUsage.from_api(body)
    assert found.sandbox_id == "sbx1" and found.currency == "EUR"
    assert found.cost == 0.00201 and found.usage.key is None
    assert [c.cap_id for c in found.caps] == ["cap_abc123"]


def _broken(base: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(base)
    where: Any = body
    for step in path[:-1]:
        where = where[step]
    if value is KeyError:
        del where[path[-1]]
    else:
        where[path[-1]] = value
    return body


@pytest.mark.parametrize(("path", "value"), [
    (("total", "cost"), "0.1"),           # a number as a string
    (("total", "vcpuSeconds"), True),     # a bool is not a number
    (("total", "storageGibHours"), KeyError),
    (("groups", 0, "key"), KeyError),     # a group without its key
    (("groups",), {"sbx1": FIGURE}),
    (("since",), "12/01/2026"),
    (("prices", "cpu"), "sometimes"),
    (("currency",), None),
])
def test_a_bad_usage_report_is_a_server_error(path: tuple[str | int, ...], value: Any) -> None:
    with pytest.raises(e.ServerError):
        UsageReport.from_api(_broken(REPORT, path, value))


@pytest.mark.parametrize(("key", "value"), [
    ("scope", "planet"), ("period", "week"), ("action", "stop"), ("state", "fine"),
    ("limit", None), ("spent", KeyError), ("periodStart", "today"), ("createdAt", "noon"),
    ("metadata", {"run_id": 42}), ("sandboxID", 7), ("capID", KeyError),
])
def test_a_bad_cap_is_a_server_error(key: str, value: Any) -> None:
    with pytest.raises(e.ServerError):
        CostCap.from_api(_broken(CAP, (key,), value))


def test_usage_query_on_the_wire() -> None:
    """Metadata pairs repeat as key:value; days are ISO; only what was asked is sent."""
    params = usage_params("metadata.run_id", {"team": "a", "run": "r:1"}, "sbx1",
                          date(2026, 12, 1), "2026-12-31")
    assert params.get_list("metadata") == ["team:a", "run:r:1"]
    assert (params["groupBy"], params["sandboxID"]) == ("metadata.run_id", "sbx1")
    assert (params["since"], params["until"]) == ("2026-12-01", "2026-12-31")
    assert dict(usage_params("day", None, None, None, None)) == {"groupBy": "day"}


@pytest.mark.parametrize("kwargs", [
    {"group_by": "week"}, {"group_by": "metadata."}, {"group_by": "metadata"},
    {"since": "2026-13-01"}, {"since": "20261201"}, {"until": datetime(2026, 12, 1)},
    {"since": "2026-12-02", "until": "2026-12-01"},
    {"metadata": {"a:b": "c"}}, {"metadata": {"": "c"}}, {"metadata": {"a": "b,c:d"}},
    {"sandbox_id": "../caps"},
])
def test_bad_usage_arguments(kwargs: dict[str, Any]) -> None:
    args = {"group_by": "sandbox", "metadata": None, "sandbox_id": None, "since": None,
            "until": None, **kwargs}
    with pytest.raises(e.InvalidArgumentError):
        usage_params(**args)


def test_cap_bodies_on_the_wire() -> None:
    assert cap_create_body("group", 5, "day", "kill", None, {"run_id": "r"}) == {
        "scope": "group", "period": "day", "limit": 5.0, "action": "kill",
        "metadata": {"run_id": "r"}}
    assert cap_create_body("sandbox", 0.5, "total", "pause", "sbx1", None)["sandboxID"] == "sbx1"
    assert cap_create_body("team", 10, "month", "pause", None, None) == {
        "scope": "team", "period": "month", "limit": 10.0, "action": "pause"}
    assert cost_cap_body(None, None) == {}
    assert cost_cap_body(1.5, None) == {"costCap": {"limit": 1.5}}
    assert cost_cap_body(2, "kill") == {"costCap": {"limit": 2.0, "action": "kill"}}


@pytest.mark.parametrize("args", [
    ("sandbox", 1, "total", "pause", None, None),            # no sandbox named
    ("sandbox", 1, "total", "pause", "sbx1", {"a": "b"}),    # and a group
    ("group", 1, "total", "pause", None, None),              # no pair
    ("group", 1, "total", "pause", None, {"a": "b", "c": "d"}),  # two pairs
    ("group", 1, "total", "pause", "sbx1", {"a": "b"}),
    ("team", 1, "total", "pause", None, None),               # a team's needs day or month
    ("team", 1, "day", "pause", None, {"a": "b"}),
    ("planet", 1, "day", "pause", None, None),
    ("team", 1, "week", "pause", None, None),
    ("team", 1, "day", "stop", None, None),
    ("team", 0, "day", "pause", None, None),
    ("team", -1, "day", "pause", None, None),
    ("team", float("inf"), "day", "pause", None, None),
    ("team", float("nan"), "day", "pause", None, None),
    ("team", True, "day", "pause", None, None),
    ("team", "5", "day", "pause", None, None),
])
def test_bad_cap_arguments(args: tuple[Any, ...]) -> None:
    with pytest.raises(e.InvalidArgumentError):
        cap_create_body(*args)


@pytest.mark.parametrize(("limit", "action"), [(None, "pause"), (0, None), (1, "stop")])
def test_bad_cost_cap_on_create(limit: Any, action: Any) -> None:
    with pytest.raises(e.InvalidArgumentError):
        cost_cap_body(limit, action)


@pytest.fixture
def closed_port() -> Iterator[ConnectionOpts]:
    """Connection options for a loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield ConnectionOpts(api_url=f"http://127.0.0.1:{port}", api_key="k")


async def test_the_client_checks_before_sending(closed_port: ConnectionOpts) -> None:
    """Each call's arguments are refused locally; a valid call does reach for the server."""
    async with AsyncCosts(**closed_port) as costs:
        with pytest.raises(e.InvalidArgumentError):
            await costs.usage(group_by="hour")
        with pytest.raises(e.InvalidArgumentError):
            await costs.sandbox_usage("a/b")
        with pytest.raises(e.InvalidArgumentError):
            await costs.cap("")
        with pytest.raises(e.InvalidArgumentError):
            await costs.create_cap(scope="team", limit=1)
        with pytest.raises(e.InvalidArgumentError):
            await costs.update_cap("cap_1")
        with pytest.raises(e.InvalidArgumentError):
            await costs.update_cap("cap_1", limit=-2)
        with pytest.raises(e.InvalidArgumentError):
            await costs.delete_cap("")
        with pytest.raises(e.ServerUnreachableError):
            await costs.caps()
    with pytest.raises(e.InvalidArgumentError):
        await bac.AsyncSandbox.create(cost_cap_action="kill", **closed_port)
    with pytest.raises(e.InvalidArgumentError):
        await bac.AsyncSandbox.create(cost_cap=0, **closed_port)
    with pytest.raises(e.InvalidArgumentError):
        await bac.AsyncSandbox.usage("a b", **closed_port)


def test_the_blocking_client_checks_too(closed_port: ConnectionOpts) -> None:
    with bac.Costs(**closed_port) as costs:
        with pytest.raises(e.InvalidArgumentError):
            costs.create_cap(scope="group", limit=1)
        with pytest.raises(e.ServerUnreachableError):
            costs.cap("cap_1")
    with pytest.raises(e.InvalidArgumentError):
        bac.Sandbox.create(cost_cap=-1, **closed_port)
