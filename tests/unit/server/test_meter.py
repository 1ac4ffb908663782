"""The meter over a real SQLite store and the control plane's real registry, on a clock the
test moves: accrual follows state changes to the instant, survives a restart, and the
time a server was down is charged to a sandbox that kept running through it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bac_server.config import ConfigError, ServerConfig
from bac_server.control import ManualClock, SandboxState
from bac_server.control.metering import CpuCharge, Meter, PriceTable
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


class _Counter:
    """A sandbox's CPU counter as the backend reports it (``CpuMetered``), moved by the
    test as the clock is: None while it has no running processes to read."""

    def __init__(self) -> None:
        self.seconds: float | None = 0.0

    def cpu_seconds(self, sandbox_id: str) -> float | None:
        return self.seconds


async def test_used_cpu_counts_from_the_hand_out_across_a_new_count_and_a_restart(
        tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}"
    store = await SqlStore.open(url, SEALER)
    clock = ManualClock(START)
    registry = Registry(clock)
    counter = _Counter()
    meter = Meter(registry=registry, clock=clock, usage_store=store.usage,
                  checkpoint_store=store.checkpoints, cpu=counter)
    await meter.start()
    sbx = _live(SandboxState.CREATING)
    registry.add(sbx)
    counter.seconds = 3.0  # the boot's CPU: not the user's
    sbx.state = SandboxState.RUNNING
    registry.update(sbx)
    counter.seconds = 5.0
    clock.advance(10)
    assert (await _totals(meter))["sbx"].cpu_used_seconds == pytest.approx(2.0)
    counter.seconds = 6.5
    sbx.state = SandboxState.PAUSED
    registry.update(sbx)  # read as it pauses, while its processes are still there
    counter.seconds = None
    clock.advance(100)
    counter.seconds = 0.25  # resumed into new cgroups: a new count
    sbx.state = SandboxState.RUNNING
    registry.update(sbx)
    counter.seconds = 1.25
    assert (await _totals(meter))["sbx"].cpu_used_seconds == pytest.approx(4.5)
    await meter.stop()
    await store.close()

    # The server is down; the sandbox's processes use 2 s more meanwhile.
    counter.seconds = 3.25
    clock.advance(100)
    store = await SqlStore.open(url, SEALER)
    registry = Registry(clock)
    registry.add(_live())
    meter = Meter(registry=registry, clock=clock, usage_store=store.usage,
                  checkpoint_store=store.checkpoints, cpu=counter)
    try:
        await meter.start()
        assert (await _totals(meter))["sbx"].cpu_used_seconds == pytest.approx(6.5)
    finally:
        await meter.stop()
        await store.close()


def test_the_price_table_charges_the_vcpu_price_on_allocated_or_used_cpu() -> None:
    usage = Usage(vcpu_seconds=100, memory_gib_seconds=10, storage_gib_hours=1,
                  cpu_used_seconds=4)
    allocated = PriceTable(vcpu_second=0.5, memory_gib_second=0.25, storage_gib_hour=2.0)
    used = PriceTable(vcpu_second=0.5, memory_gib_second=0.25, storage_gib_hour=2.0,
                      cpu=CpuCharge.USED)
    assert allocated.cost(usage) == pytest.approx(50 + 2.5 + 2)
    assert used.cost(usage) == pytest.approx(2 + 2.5 + 2)
    assert ServerConfig.from_env({"BAC_PRICE_CPU": "used"}).price_cpu == "used"
    with pytest.raises(ConfigError, match="BAC_PRICE_CPU"):
        ServerConfig.from_env({"BAC_PRICE_CPU": "spent"})
