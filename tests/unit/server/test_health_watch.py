"""The envd health watch on a moved clock with a scripted probe: unhealthy only once envd
has been silent for the whole bound, one event per change (with its webhook type),
healthy at the first answer, and a sandbox in a lifecycle step neither checked nor
counted as silent."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from bac_server.control import Registry
from bac_server.control.sandboxes import LiveSandbox
from bac_server.control.sandboxes._health import HealthSettings, HealthWatch
from bac_server.control.sandboxes._states import Health
from bac_server.store import EventRecord, SandboxRecord

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class _Log:
    def __init__(self) -> None:
        self.events: list[EventRecord] = []

    async def add_event(self, event: EventRecord) -> None:
        self.events.append(event)


def _running(sandbox_id: str) -> LiveSandbox:
    sbx = LiveSandbox.from_record(SandboxRecord(
        sandbox_id=sandbox_id, team_id="team", template_id="base", alias=None,
        state="running", started_at=NOW, end_at=NOW + timedelta(minutes=5), cpu_count=2,
        memory_mb=512, disk_mb=1024, envd_access_token="tok", traffic_access_token=None,
        metadata={}))
    sbx.attach("10.0.0.2", 49983)
    return sbx


def test_unhealthy_after_the_bound_and_healthy_at_the_first_answer() -> None:
    registry = Registry()
    sbx = _running("a")
    registry.add(sbx)
    log, now, answers, changes = _Log(), [0.0], {"10.0.0.2": False}, []

    async def probe(sandbox_id: str, address: str, port: int, bound_s: float) -> bool:
        return answers[address]

    watch = HealthWatch(registry=registry, sandbox_store=log,  # type: ignore[arg-type]
                        settings=HealthSettings(unhealthy_after_s=10.0), probe=probe,
                        on_change=lambda: changes.append(1), monotonic=lambda: now[0])

    async def scenario() -> None:
        for at in (0.0, 5.0, 9.9):
            now[0] = at
            await watch.check_once()
            assert sbx.health is Health.HEALTHY, at
        now[0] = 10.0
        await watch.check_once()
        assert sbx.health is Health.UNHEALTHY
        now[0] = 20.0
        await watch.check_once()  # still silent: no second event
        answers["10.0.0.2"] = True
        await watch.check_once()
        assert sbx.health is Health.HEALTHY
        answers["10.0.0.2"] = False
        now[0] = 25.0
        await watch.check_once()  # a new streak starts here, not at 0.0
        now[0] = 34.0
        await watch.check_once()
        assert sbx.health is Health.HEALTHY

    asyncio.run(scenario())
    assert [(e.kind, e.level, e.wire_type) for e in log.events] == [
        ("unhealthy", "error", "bac.sandbox.unhealthy"),
        ("healthy", "info", "bac.sandbox.healthy")]
    assert log.events[0].fields["silent_s"] == "10.0"
    assert len(changes) == 2


def test_a_sandbox_mid_step_is_not_checked_and_its_streak_restarts() -> None:
    registry = Registry()
    sbx = _running("b")
    registry.add(sbx)
    log, now, probed = _Log(), [0.0], []

    async def probe(sandbox_id: str, address: str, port: int, bound_s: float) -> bool:
        probed.append(now[0])
        return False

    watch = HealthWatch(registry=registry, sandbox_store=log,  # type: ignore[arg-type]
                        settings=HealthSettings(unhealthy_after_s=10.0), probe=probe,
                        monotonic=lambda: now[0])

    async def scenario() -> None:
        await watch.check_once()
        async with sbx.lock:  # a pause in progress: its envd may be frozen
            now[0] = 12.0
            await watch.check_once()
        now[0] = 13.0
        await watch.check_once()
        assert sbx.health is Health.HEALTHY  # silent since 13.0 only

    asyncio.run(scenario())
    assert probed == [0.0, 13.0] and log.events == []
