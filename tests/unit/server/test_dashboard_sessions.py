"""Mission Control's server-side sessions: expiry by idleness and by age, sign-out, the
bounded table; and the registry's change feed its live fleet reads."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from bac_server.control import LiveSandbox, SandboxState, Team
from bac_server.control.sandboxes import ChangeFeed, Registry
from bac_server.dashboard._sessions import Principal, Sessions


def live_sandbox(sandbox_id: str, team_id: str) -> LiveSandbox:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return LiveSandbox(
        sandbox_id=sandbox_id, team_id=team_id, template_id="base", alias=None, cpu_count=1,
        memory_mb=512, disk_mb=1, envd_access_token="x", traffic_access_token=None,
        metadata={}, env_vars={}, network=None, allow_internet_access=None, started_at=at,
        end_at=at, state=SandboxState.RUNNING)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_session_ends_when_idle_too_long_or_too_old() -> None:
    clock = Clock()
    table = Sessions(idle_s=10, max_s=25, clock=clock)
    cookie, session = table.open(Principal(Team("t1", "t1"), "team t1", "key"))
    clock.now = 9
    assert table.find(cookie) is session  # each request resets the idle time
    clock.now = 18
    assert table.find(cookie) is session
    clock.now = 26  # never idle 10 s, but older than 25 s
    assert table.find(cookie) is None and not table.alive(session)
    cookie, session = table.open(Principal(None, "operator"))
    clock.now = 37
    assert table.find(cookie) is None


def test_sign_out_ends_the_session_and_the_table_is_bounded() -> None:
    table = Sessions(idle_s=100, max_s=100, limit=2)
    first, session = table.open(Principal(None, "operator"))
    table.close(first)
    assert table.find(first) is None and not table.alive(session)
    cookies = [table.open(Principal(None, "operator"))[0] for _ in range(3)]
    assert len(table) == 2 and table.find(cookies[0]) is None
    assert table.find("x" * 500) is None and table.find(None) is None


async def test_the_feed_tells_each_subscriber_what_changed_and_closes() -> None:
    registry = Registry()
    feed = ChangeFeed(registry)
    async with feed.subscribe() as sub:
        assert await sub.wait(0.01) == []
        registry.add(live_sandbox("s1", "t1"))
        registry.add(live_sandbox("s2", "t2"))
        changes = await sub.wait(1)
        assert {(c.sandbox_id, c.team_id) for c in changes} == {("s1", "t1"), ("s2", "t2")}
        waiting = asyncio.create_task(sub.wait(30))
        await asyncio.sleep(0)
        feed.close()
        assert await asyncio.wait_for(waiting, 1) == [] and sub.closed
    assert feed.subscribers == 0
