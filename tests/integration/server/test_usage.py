"""Usage and cost on a simulated clock: the real server in this process (store, backend,
API), real sandboxes, and a clock the test moves (``inprocess_server``), so every figure is
checked against a hand computation from the price table.

* a running sandbox accrues its vCPUs and memory for each second it runs, priced by the
  table; a paused one stops accruing at the moment it paused, and resumes accruing;
  paused to disk, the memory state it wrote accrues as storage (GiB-hours) meanwhile;
* the team's usage groups by sandbox, metadata value and day, and filters by metadata;
* an ended sandbox's usage stays readable; another team's sandbox is a 404;
* a bad grouping, day or range is a 400 naming it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from inprocess_server import InProcessServer, inprocess_server

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

PRICES = {"price_vcpu_second": 0.5, "price_memory_gib_second": 0.25,
          "price_storage_gib_hour": 2.0, "price_currency": "EUR"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[InProcessServer]:
    async with inprocess_server("usage", teams=("alpha", "beta"), **PRICES) as srv:
        yield srv


def _api(server: InProcessServer, team: int = 0) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=120,
                             headers={"X-API-KEY": server.keys[team]})


async def _create(server: InProcessServer, **body: Any) -> str:
    async with _api(server) as api:
        made = await api.post("/v2/sandboxes", json={"templateID": "base", "timeout": 0,
                                                     **body})
    assert made.status_code == 201, made.text
    return str(made.json()["sandboxID"])


async def _usage(server: InProcessServer, sandbox_id: str) -> dict[str, Any]:
    async with _api(server) as api:
        found = await api.get(f"/sandboxes/{sandbox_id}/usage")
    assert found.status_code == 200, found.text
    body: dict[str, Any] = found.json()
    return body


def _cost(vcpu_s: float, gib_s: float) -> float:
    return round(vcpu_s * PRICES["price_vcpu_second"]
                 + gib_s * PRICES["price_memory_gib_second"], 6)


async def test_running_time_is_priced_and_a_pause_stops_it(server: InProcessServer) -> None:
    sid = await _create(server, cpuCount=2, memoryMB=512)
    async with _api(server) as api:
        try:
            await server.advance(100)
            used = await _usage(server, sid)
            assert used["currency"] == "EUR"
            assert used["vcpuSeconds"] == pytest.approx(200.0)
            assert used["memoryGibSeconds"] == pytest.approx(50.0)
            assert used["cost"] == pytest.approx(_cost(200, 50))
            assert (await api.post(f"/sandboxes/{sid}/pause")).status_code == 204
            paused = (await api.get(f"/sandboxes/{sid}/trace",
                                    params={"kind": "paused"})).json()["events"][-1]
            saved_gib = int(paused["fields"]["bytes"]) / 1024 ** 3
            assert saved_gib > 0
            await server.advance(1000)  # paused: no compute accrues; its saved state does
            during = await _usage(server, sid)
            assert during["vcpuSeconds"] == pytest.approx(200.0)
            assert during["storageGibHours"] == pytest.approx(saved_gib * 1000 / 3600)
            resumed = await api.post(f"/sandboxes/{sid}/resume", json={"timeout": 3600})
            assert resumed.status_code == 201, resumed.text
            await server.advance(10)
            assert (await _usage(server, sid))["vcpuSeconds"] == pytest.approx(220.0)
        finally:
            gone = await api.delete(f"/sandboxes/{sid}")
            assert gone.status_code == 204, gone.text
        await server.advance(500)  # ended: nothing more accrues, and it is still readable
        ended = await _usage(server, sid)
        assert ended["vcpuSeconds"] == pytest.approx(220.0)
        assert ended["storageGibHours"] == pytest.approx(saved_gib * 1000 / 3600)
        assert ended["cost"] == pytest.approx(
            _cost(220, 55) + saved_gib * 1000 / 3600 * PRICES["price_storage_gib_hour"],
            abs=2e-6)


async def test_usage_groups_by_sandbox_metadata_and_day(server: InProcessServer) -> None:
    first = await _create(server, cpuCount=1, memoryMB=1024, metadata={"run_id": "r-1"})
    second = await _create(server, cpuCount=2, memoryMB=1024, metadata={"run_id": "r-2"})
    async with _api(server) as api:
        try:
            await server.advance(30)
            by_run = (await api.get("/usage", params={"groupBy": "metadata.run_id"})).json()
            runs = {g["key"]: g for g in by_run["groups"]}
            assert runs["r-1"]["vcpuSeconds"] == pytest.approx(30.0)
            assert runs["r-2"]["vcpuSeconds"] == pytest.approx(60.0)
            assert runs["r-2"]["cost"] == pytest.approx(_cost(60, 30))
            assert by_run["groups"][0]["cost"] >= by_run["groups"][-1]["cost"]
            assert by_run["prices"] == {"vcpuSecond": 0.5, "memoryGibSecond": 0.25,
                                        "storageGibHour": 2.0, "cpu": "allocated"}
            one_run = (await api.get("/usage", params={"metadata": "run_id:r-2"})).json()
            assert [g["key"] for g in one_run["groups"]] == [second]
            assert one_run["total"]["vcpuSeconds"] == pytest.approx(60.0)
            by_day = (await api.get("/usage", params={"groupBy": "day"})).json()
            assert by_day["until"] in {g["key"] for g in by_day["groups"]}
            assert by_day["total"]["cost"] == pytest.approx(
                sum(g["cost"] for g in by_day["groups"]), abs=1e-5)
            # Another team sees none of it.
            async with _api(server, team=1) as other:
                theirs = (await other.get("/usage")).json()
                assert theirs["groups"] == [] and theirs["total"]["cost"] == 0
                assert (await other.get(f"/sandboxes/{first}/usage")).status_code == 404
        finally:
            for sid in (first, second):
                await api.delete(f"/sandboxes/{sid}")


@pytest.mark.parametrize("params, names", [
    ({"groupBy": "owner"}, "groupBy"),
    ({"groupBy": "metadata."}, "groupBy"),
    ({"since": "2026-13-01"}, "since"),
    ({"until": "yesterday"}, "until"),
    ({"since": "2026-12-02", "until": "2026-12-01"}, "since"),
    ({"metadata": "run_id"}, "metadata"),
])
async def test_bad_usage_queries_are_400s(server: InProcessServer, params: dict[str, str],
                                          names: str) -> None:
    async with _api(server) as api:
        answer = await api.get("/usage", params=params)
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == 400 and names in answer.json()["message"]
