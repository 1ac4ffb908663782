"""Usage rows and cost caps in the SQL store on each engine: deltas add up (never
replace), sums group by sandbox, team, day and metadata value, caps round-trip."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from bac_server.store import (
    CapRecord,
    MeterMark,
    SandboxRecord,
    Usage,
    UsageDelta,
    UsageQuery,
)
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SEALER = Sealer(Sealer.new_key())


def _sandbox(sandbox_id: str, run: str) -> SandboxRecord:
    return SandboxRecord(
        sandbox_id=sandbox_id, team_id="team", template_id="base", alias=None,
        state="running", started_at=NOW, end_at=NOW + timedelta(minutes=5), cpu_count=2,
        memory_mb=512, disk_mb=1024, envd_access_token="tok", traffic_access_token=None,
        metadata={"run": run})


async def test_usage_adds_up_and_groups(database_url: str) -> None:
    store = await SqlStore.open(database_url, SEALER)
    try:
        await store.keys.ensure_team("team")
        await store.sandboxes.insert_sandbox(_sandbox("a", "r1"))
        await store.sandboxes.insert_sandbox(_sandbox("b", "r2"))
        one = Usage(vcpu_seconds=2, memory_gib_seconds=1, storage_gib_hours=0.5)
        later = NOW + timedelta(seconds=30)
        await store.usage.add_usage([
            UsageDelta("a", "team", "2026-01-01", one, NOW),
            UsageDelta("a", "team", "2026-01-02", one, NOW),
            UsageDelta("b", "team", "2026-01-02", one, NOW),
        ])
        # Added to the row, not replacing it; metered_until only moves forward.
        await store.usage.add_usage([UsageDelta("a", "team", "2026-01-02", one, later, 7.5),
                                     UsageDelta("b", "team", "2026-01-02", Usage(), NOW)])
        # An older write (a late flush) never moves the mark back; one without a reading
        # keeps the counter last read.
        await store.usage.add_usage([UsageDelta("a", "team", "2026-01-02", Usage(), NOW, 1.0),
                                     UsageDelta("a", "team", "2026-01-01", Usage(), NOW, 2.0)])
        by_sandbox = dict(await store.usage.usage(UsageQuery("team")))
        assert by_sandbox["a"] == Usage(6, 3, 1.5)
        assert by_sandbox["b"] == Usage(2, 1, 0.5)
        by_day = dict(await store.usage.usage(UsageQuery("team", group_by="day")))
        assert by_day == {"2026-01-01": Usage(2, 1, 0.5), "2026-01-02": Usage(6, 3, 1.5)}
        by_run = dict(await store.usage.usage(UsageQuery("team", group_by="metadata",
                                                         group_key="run")))
        assert by_run == {"r1": Usage(6, 3, 1.5), "r2": Usage(2, 1, 0.5)}
        only = await store.usage.usage(UsageQuery("team", group_by="team", since="2026-01-02",
                                                  metadata={"run": "r1"}))
        assert only == [("team", Usage(4, 2, 1.0))]
        assert await store.usage.usage(UsageQuery("other")) == []
        assert await store.usage.meter_marks(["a", "b", "c"]) == {
            "a": MeterMark(later, 7.5), "b": MeterMark(NOW, None)}
    finally:
        await store.close()


async def test_caps_round_trip_and_are_bounded_per_team(database_url: str) -> None:
    store = await SqlStore.open(database_url, SEALER)
    try:
        cap = CapRecord("cap_1", "team", "group", "day", 1.5, "pause", NOW, NOW,
                        metadata_key="run", metadata_value="r1")
        assert await store.usage.insert_cap(cap, max_per_team=1)
        assert not await store.usage.insert_cap(
            dataclasses.replace(cap, cap_id="cap_2"), max_per_team=1)
        raised = dataclasses.replace(cap, amount=3.0, warned="2026-01-02",
                                     updated_at=NOW + timedelta(seconds=1))
        assert await store.usage.update_cap(raised)
        assert await store.usage.get_cap("team", "cap_1") == raised
        assert await store.usage.get_cap("other", "cap_1") is None
        assert await store.usage.list_caps() == [raised]
        assert await store.usage.delete_cap("team", "cap_1")
        assert await store.usage.list_caps("team") == []
    finally:
        await store.close()
