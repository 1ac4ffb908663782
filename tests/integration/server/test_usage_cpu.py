"""Used-CPU pricing (``BAC_PRICE_CPU=used``) on the real server in this process, with real
sandboxes and a simulated clock: the CPU time charged is what the sandbox's cgroup
counted, read here by hand from the kernel (the cgroup named in ``/proc/<pid>/cgroup`` of
its envd), and the cost is that time at the vCPU price plus the allocated memory, as the
table says. A pause stops the count; a resume (restored into new cgroups) counts on from
where it was; an end keeps what was charged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from e2b import AsyncSandbox
from inprocess_server import InProcessServer, inprocess_server

from bac_server.backends.namespaces import NamespaceBackend, testing

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

PRICES = {"price_vcpu_second": 0.5, "price_memory_gib_second": 0.25,
          "price_storage_gib_hour": 2.0, "price_cpu": "used"}
# Spins until the process has used 0.4 s of CPU.
BURN = ("import time\n"
        "start = time.process_time()\n"
        "while time.process_time() - start < 0.4:\n"
        "    pass\n")
# What envd spends outside the test's two readings (its first RPCs load their services).
SLACK_S = 0.3


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[InProcessServer]:
    async with inprocess_server("usage-cpu", **PRICES) as srv:
        yield srv


def _api(server: InProcessServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=120,
                             headers={"X-API-KEY": server.keys[0]})


def _cgroup_cpu_s(pid: int) -> float:
    """The CPU time of the cgroup the kernel says ``pid`` is in, read from cgroupfs."""
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            root = next(m[1] for m in mounts
                        if m[2] == "cgroup" and "cpuacct" in m[3].split(","))
            return int(Path(root + path, "cpuacct.usage").read_text()) / 1e9
    unified = next(m[1] for m in mounts if m[2] == "cgroup2")
    path = next(line[3:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                if line.startswith("0::"))
    stat = dict(line.split() for line in Path(unified + path, "cpu.stat").read_text()
                .splitlines())
    return int(stat["usage_usec"]) / 1e6


def _backend(server: InProcessServer) -> NamespaceBackend:
    backend = server.plane.backend
    assert isinstance(backend, NamespaceBackend)
    return backend


async def _usage(api: httpx.AsyncClient, sandbox_id: str) -> dict[str, Any]:
    found = await api.get(f"/sandboxes/{sandbox_id}/usage")
    assert found.status_code == 200, found.text
    body: dict[str, Any] = found.json()
    return body


async def _burn_counted(server: InProcessServer, sandbox_id: str) -> float:
    """Spin 0.4 s of CPU inside; the CPU the sandbox's cgroup counted meanwhile."""
    sbx = await AsyncSandbox.connect(sandbox_id, **server.opts())
    await sbx.files.write("/tmp/burn.py", BURN)
    pid = testing.init_pid(_backend(server), sandbox_id)
    before = _cgroup_cpu_s(pid)
    assert (await sbx.commands.run("python3 /tmp/burn.py")).exit_code == 0
    counted = _cgroup_cpu_s(pid) - before
    assert counted >= 0.4
    return counted


async def test_used_cpu_is_what_the_cgroup_counted_and_is_priced(
        server: InProcessServer) -> None:
    async with _api(server) as api:
        made = await api.post("/v2/sandboxes", json={
            "templateID": "base", "timeout": 0, "cpuCount": 2, "memoryMB": 512})
        assert made.status_code == 201, made.text
        sid = made.json()["sandboxID"]
        try:
            counted = await _burn_counted(server, sid)
            await server.advance(10)
            used = await _usage(api, sid)
            # The meter's baseline is read at the hand-out, before the test's first
            # reading, and its last at this read, after the test's second.
            assert counted <= used["cpuUsedSeconds"] <= counted + SLACK_S
            assert used["vcpuSeconds"] == pytest.approx(20.0)  # allocated, still reported
            assert used["memoryGibSeconds"] == pytest.approx(5.0)
            # The vCPU price is charged on the CPU used, not on the 20 allocated seconds.
            assert used["cost"] == pytest.approx(
                used["cpuUsedSeconds"] * 0.5 + 5.0 * 0.25, abs=2e-6)
            team = (await api.get("/usage")).json()
            assert team["prices"]["cpu"] == "used"

            assert (await api.post(f"/sandboxes/{sid}/pause")).status_code == 204
            at_pause = (await _usage(api, sid))["cpuUsedSeconds"]
            assert at_pause >= used["cpuUsedSeconds"]
            await server.advance(1000)  # paused: no CPU is counted, no memory charged
            paused = await _usage(api, sid)
            assert paused["cpuUsedSeconds"] == at_pause
            assert paused["memoryGibSeconds"] == pytest.approx(5.0)

            resumed = await api.post(f"/sandboxes/{sid}/resume", json={"timeout": 0})
            assert resumed.status_code == 201, resumed.text
            again = await _burn_counted(server, sid)
            after = (await _usage(api, sid))["cpuUsedSeconds"]
            # Counted on from where it was, in the resumed sandbox's new cgroups.
            assert at_pause + again <= after <= at_pause + again + SLACK_S
        finally:
            assert (await api.delete(f"/sandboxes/{sid}")).status_code == 204
        ended = await _usage(api, sid)
        assert ended["cpuUsedSeconds"] >= after
        await server.advance(100)
        assert (await _usage(api, sid))["cpuUsedSeconds"] == ended["cpuUsedSeconds"]
