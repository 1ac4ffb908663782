"""The meter over a real SQLite store and the control plane's real registry, on a clock the
test moves: accrual follows state changes to the instant, survives a restart, and the
time a server was down is charged to a sandbox that kept running through it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bac_server.control import ManualClock, SandboxState
from bac_server.control.metering import Meter
from bac_server.control.sandboxes import LiveSandbox, Registry
from bac_server.store import SandboxRecord, Usage, UsageQuery
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

START = datetime(2026, 12, 2, 23, 59, 0, tzinfo=UTC)
SEALER = Sealer(Sealer.new_key())


def _live(state: SandboxState = SandboxState.RUNNING) -> LiveSandbox:
    record = SandboxRecord(
        sandbox_id="sbx", team_id="team", template_id="base", alias=None, state=state.value,
        started_at=START, end_at=START + timedelta(hours=1), cpu_count=2, memory_mb=2048,
        disk_mb=1024, envd_access_token="t", traffic_access_token=None)
    return LiveSandbox.from_record(record)


async def _totals(meter: Meter, group_by: str = "sandbox") -> dict[str, Usage]:
    return dict(await meter.usage(UsageQuery("team", group_by=group_by)))  # type: ignore[arg-type]


async def test_accrual_follows_state_survives_restart_and_charges_downtime(
        tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}"
    store = await SqlStore.open(url, SEALER)
    clock = ManualClock(START)
    registry = Registry(clock)
    meter = Meter(registry=registry, clock=clock, usage_store=store.usage,
                  checkpoint_store=store.checkpoints)
    await meter.start()
    sbx = _live()
    registry.add(sbx)
    clock.advance(30)
    sbx.state = SandboxState.PAUSED
    registry.update(sbx)  # the charge stops here
    clock.advance(600)
    sbx.state = SandboxState.RUNNING
    registry.update(sbx)
    clock.advance(60)  # resumed after midnight: a new day's row
    assert (await _totals(meter))["sbx"] == Usage(vcpu_seconds=180, memory_gib_seconds=180)
    by_day = await _totals(meter, "day")
    assert by_day == {"2026-12-02": Usage(60, 60), "2026-12-03": Usage(120, 120)}
    await meter.stop()
    await store.close()

    # The server is down 100 s; the sandbox keeps running; a new server meters it from
    # when the old one last wrote.
    clock.advance(100)
    store = await SqlStore.open(url, SEALER)
    registry = Registry(clock)
    registry.add(_live())
    meter = Meter(registry=registry, clock=clock, usage_store=store.usage,
                  checkpoint_store=store.checkpoints)
    try:
        await meter.start()
        clock.advance(20)
        assert (await _totals(meter))["sbx"].vcpu_seconds == pytest.approx(180 + 2 * 120)
    finally:
        await meter.stop()
        await store.close()
