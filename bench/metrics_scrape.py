"""A Prometheus scrape of ``/metrics`` with N sandboxes in the control plane (default 1000).

The fleet is the control plane's real ``Registry`` (the structure the server's scrape
reads), filled through its own API (``add``, then ``update`` as each goes running, as the
creator does) with N sandboxes over 20 teams and 5 templates, a tenth of them paused; the
instruments have seen N creates, pauses and resumes, and gateway traffic. Each scrape is
one HTTP GET to the real scrape listener (its own socket, bearer token) timed from request
to last byte: collecting the registry, accruing the spend, rendering, sending.
Creating 1000 real sandboxes to fill it would take minutes and GiBs for the same numbers:
the scrape never looks past the registry.

    .venv/bin/python bench/metrics_scrape.py [-n 1000] [--scrapes 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import UTC, datetime, timedelta

import httpx

from bac_server.api.scrape import ScrapeListener
from bac_server.control import LiveSandbox, Registry, SandboxState
from bac_server.control.clock import SystemClock
from bac_server.control.telemetry import Telemetry


def fill(registry: Registry, telemetry: Telemetry, count: int) -> None:
    now = datetime.now(UTC)
    for i in range(count):
        sbx = LiveSandbox(
            sandbox_id=f"s{i:015x}", team_id=f"team-{i % 20}", template_id=f"tpl-{i % 5}",
            alias=None, cpu_count=2, memory_mb=512, disk_mb=10_240, envd_access_token="t",
            traffic_access_token=None, metadata={"run": str(i % 7)}, env_vars={},
            network=None, allow_internet_access=None, started_at=now,
            end_at=now + timedelta(hours=1), state=SandboxState.CREATING)
        registry.add(sbx)
        sbx.state = SandboxState.RUNNING
        sbx.attach(f"10.11.{i // 250}.{i % 250}", 49983)
        registry.update(sbx)
        telemetry.created(("pool", "boot", "start_snapshot")[i % 3], sbx.template_id,
                          0.005 * (i % 40))
        if i % 10 == 0:
            sbx.state = SandboxState.PAUSED
            registry.update(sbx)
            telemetry.paused("disk", 0.1)
            telemetry.resumed("disk", 0.05)
        telemetry.gateway_requests.labels("http", "2xx").inc()
        telemetry.gateway_bytes.labels("out").inc(1000)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=1000, help="sandboxes in the registry")
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    registry, telemetry = Registry(), Telemetry()
    telemetry.watch(registry, SystemClock())
    fill(registry, telemetry, args.n)
    listener = ScrapeListener(telemetry, "127.0.0.1", 0, "bench-token")
    await listener.start()
    url = f"http://127.0.0.1:{listener.port}/metrics"
    times, size = [], 0
    try:
        async with httpx.AsyncClient(headers={"Authorization": "Bearer bench-token"}) as client:
            for _ in range(10):  # warm-up
                await client.get(url)
            for _ in range(args.scrapes):
                began = time.perf_counter()
                answer = await client.get(url)
                times.append((time.perf_counter() - began) * 1000)
                assert answer.status_code == 200
                size = len(answer.content)
    finally:
        await listener.close()
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(f"{args.n} sandboxes, {args.scrapes} scrapes, {size} bytes each: "
          f"median {statistics.median(times):.2f} ms, p99 {p99:.2f} ms, max {times[-1]:.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
