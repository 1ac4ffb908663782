"""Usage, cost and cost caps through the SDK against a real server: a sandbox's own cap and
its usage, caps made, raised and deleted per team, and a reached cap's typed refusal."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from sdk_server import BacServer

import bac
from bac import ConnectionOpts, CostCap, Costs, Sandbox, SandboxState

pytestmark = [pytest.mark.root, pytest.mark.slow]

REACHED_WITHIN_S = 30.0  # the meter's writes plus the enforcer's round, with room


def _opts(server: BacServer, key: str | None = None) -> ConnectionOpts:
    return ConnectionOpts(api_url=server.url, api_key=key or server.api_key)


def _tag() -> str:
    return f"t{time.monotonic_ns()}"


def test_a_sandbox_with_a_cost_cap_reports_its_usage(bac_server: BacServer) -> None:
    """create(cost_cap=) makes the sandbox's own cap; its usage names it, and the team's
    report filtered to it has one group, keyed by its id."""
    with Sandbox.create(timeout=60, cost_cap=2.5, cost_cap_action="kill",
                        **_opts(bac_server)) as box:
        mine = box.usage()
        assert mine.sandbox_id == box.sandbox_id and mine.currency == "USD"
        assert mine.usage.vcpu_seconds > 0 and mine.cost >= 0  # metered up to the read
        [cap] = [c for c in mine.caps if c.scope == "sandbox"]
        assert (cap.sandbox_id, cap.period, cap.limit, cap.action, cap.state) == (
            box.sandbox_id, "total", 2.5, "kill", "ok")
        assert Sandbox.usage(box.sandbox_id, **_opts(bac_server)).caps[0].cap_id == cap.cap_id
        with Costs(**_opts(bac_server)) as costs:
            today = datetime.now(UTC).date()
            report = costs.usage(sandbox_id=box.sandbox_id, since=today, until=today)
            assert (report.since, report.until) == (today, today)
            assert report.prices.cpu in ("allocated", "used")
            assert [g.key for g in report.groups] == [box.sandbox_id]
            assert report.total.vcpu_seconds == pytest.approx(report.groups[0].vcpu_seconds)
            assert cap.cap_id in {c.cap_id for c in costs.caps()}
    with Costs(**_opts(bac_server, bac_server.other_team_key)) as other, \
            pytest.raises(bac.SandboxNotFoundError):
        other.sandbox_usage(box.sandbox_id)


def test_caps_are_made_raised_and_deleted_per_team(bac_server: BacServer) -> None:
    with Costs(**_opts(bac_server)) as costs, \
            Costs(**_opts(bac_server, bac_server.other_team_key)) as other:
        group = costs.create_cap(scope="group", metadata={"run": _tag()}, limit=5,
                                 period="day")
        team = costs.create_cap(scope="team", limit=1000, period="month", action="kill")
        try:
            assert (group.scope, group.period, group.limit, group.action, group.state) == (
                "group", "day", 5.0, "pause", "ok")
            assert group.period_start == datetime.now(UTC).date()
            assert team.period_start == datetime.now(UTC).date().replace(day=1)
            assert costs.cap(group.cap_id).metadata == group.metadata
            raised = costs.update_cap(group.cap_id, limit=7.5, action="kill")
            assert (raised.limit, raised.action) == (7.5, "kill")
            assert raised.updated_at >= group.updated_at
            assert group.cap_id not in {c.cap_id for c in other.caps()}
            with pytest.raises(bac.NotFoundError):
                other.cap(group.cap_id)
            assert not other.delete_cap(group.cap_id)
        finally:
            assert costs.delete_cap(team.cap_id)
            assert costs.delete_cap(group.cap_id)
        assert not costs.delete_cap(group.cap_id)
        with pytest.raises(bac.NotFoundError):
            costs.cap(group.cap_id)


def _reached(costs: Costs, cap: CostCap) -> CostCap:
    # The meter and the enforcer run on the server's clock: poll the cap's state.
    deadline = time.monotonic() + REACHED_WITHIN_S
    while not (found := costs.cap(cap.cap_id)).reached:
        assert time.monotonic() < deadline, f"cap not reached in {REACHED_WITHIN_S}s: {found}"
        time.sleep(0.2)
    return found


def test_a_reached_group_cap_pauses_and_refuses_until_raised(bac_server: BacServer) -> None:
    """A group cap reached pauses its running sandbox and makes a create it would cover a
    CapReachedError naming it; raising it lets the sandbox resume."""
    run = {"run": _tag()}
    with Costs(**_opts(bac_server)) as costs:
        cap = costs.create_cap(scope="group", metadata=run, limit=1e-9)
        try:
            with Sandbox.create(timeout=60, metadata=run, **_opts(bac_server)) as box:
                reached = _reached(costs, cap)
                assert reached.spent >= reached.limit
                with pytest.raises(bac.CapReachedError) as refused:
                    Sandbox.create(timeout=60, metadata=run, **_opts(bac_server))
                assert refused.value.cap_id == cap.cap_id
                assert refused.value.status_code == 403
                deadline = time.monotonic() + 10
                while box.get_info().state is not SandboxState.PAUSED:
                    assert time.monotonic() < deadline, "a reached cap left its sandbox running"
                    time.sleep(0.2)
                with pytest.raises(bac.CapReachedError) as held:
                    Sandbox.connect(box.sandbox_id, **_opts(bac_server))
                assert held.value.cap_id == cap.cap_id
                costs.update_cap(cap.cap_id, limit=1000)
                with Sandbox.connect(box.sandbox_id, **_opts(bac_server)) as again:
                    assert again.commands.run("echo back").stdout == "back\n"
        finally:
            costs.delete_cap(cap.cap_id)
