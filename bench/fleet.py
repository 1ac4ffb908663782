"""Mission Control's fleet page over many sandboxes, in a real browser.

Starts a Bac server (fresh data dir, the machine's templates), creates ``--n`` sandboxes
of the lightest template (``base``) through the REST API, then measures:

* first render: Debian's Chromium (Playwright) signed in, from ``goto(/ui/fleet)`` until
  the table holds its first page (100 rows, the default) and counts every sandbox,
  ``--renders`` times;
* the server's CPU while the page is open and live (its event stream connected, the rows
  refetched at each change and every few seconds), over ``--seconds``, next to the same
  span with no page open (the floor: sampling, timers); both as % of one core.

    .venv/bin/python bench/fleet.py [--n 1000] [--renders 5] [--seconds 30]

Targets (issue 14): first render <= 1 s, live updates <= 2 % of one core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import httpx
from _stats import pct
from tti import bac_server

CHROMIUM = "/usr/bin/chromium"
PER_PAGE = 100  # the fleet table's default page
TICKS = os.sysconf("SC_CLK_TCK")


def _server_pid(data_dir: Path) -> int:
    """The server's process: the one started with this data dir in its environment."""
    needle = f"BAC_DATA_DIR={data_dir}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0") and \
                    b"serve()" in (entry / "cmdline").read_bytes():
                return int(entry.name)
        except OSError:
            continue
    raise RuntimeError(f"no server process for {data_dir}")


def _cpu_seconds(pid: int) -> float:
    """User + system time of the server process itself (its threads, not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _core_pct(pid: int, seconds: float) -> float:
    start, began = _cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (_cpu_seconds(pid) - start) / (time.monotonic() - began) * 100


async def _create(url: str, key: str, n: int) -> list[str]:
    limit = asyncio.Semaphore(8)
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": key},
                                 timeout=120) as client:
        async def one() -> str:
            async with limit:
                made = await client.post("/sandboxes", json={"templateID": "base",
                                                              "timeout": 3600})
                made.raise_for_status()
                return str(made.json()["sandboxID"])

        return list(await asyncio.gather(*(one() for _ in range(n))))


def _api_at_scale(url: str, key: str, n: int, samples: int = 50) -> None:
    """The API over a fleet of ``n``: listing every sandbox (E2B's v2 list, all pages),
    and a create (to its answer) next to them."""
    lists, pages, creates = [], [], []
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=120) as client:
        for _ in range(samples):
            started = time.perf_counter()
            token, seen = None, 0
            while True:
                asked = time.perf_counter()
                page = client.get("/v2/sandboxes", params={"limit": 100, "state": "running",
                                                          **({"nextToken": token} if token
                                                             else {})})
                page.raise_for_status()
                pages.append((time.perf_counter() - asked) * 1000)
                seen += len(page.json())
                token = page.headers.get("x-next-token")
                if not token:
                    break
            lists.append((time.perf_counter() - started) * 1000)
        assert seen >= n, (seen, n)
        for _ in range(samples // 2):
            started = time.perf_counter()
            made = client.post("/sandboxes", json={"templateID": "base", "timeout": 60})
            made.raise_for_status()
            creates.append((time.perf_counter() - started) * 1000)
            client.delete(f"/sandboxes/{made.json()['sandboxID']}")
    print(f"list, one page of 100 of {n}: p50 {statistics.median(pages):.1f} ms, "
          f"p99 {pct(pages, 0.99):.1f} ms; all pages: p50 {statistics.median(lists):.1f} ms, "
          f"p99 {pct(lists, 0.99):.1f} ms")
    print(f"create beside {n}: p50 {statistics.median(creates):.1f} ms, "
          f"p99 {pct(creates, 0.99):.1f} ms (n={len(creates)}, no pool: each boots)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="sandboxes in the fleet")
    parser.add_argument("--renders", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=30.0, help="each CPU span")
    args = parser.parse_args()
    # No pool: the CPU floor is the fleet standing still, not refills. Booted, not
    # restored: a sandbox that never ran a command holds 8 MiB booted, 25 restored from
    # a start snapshot (envd served a command before it): a thousand must fit.
    with bac_server(0, BAC_MAX_SANDBOXES_PER_TEAM=str(args.n + 10), BAC_POOL_MAX="0",
                    BAC_START_SNAPSHOT_POOL="0", BAC_START_SNAPSHOTS="false"
                    ) as (url, key, data_dir):
        try:
            _measure(args, url, key, data_dir)
        finally:
            _delete_all(url, key)  # a sandbox outlives its server: none is left behind


def _delete_all(url: str, key: str) -> None:
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=120) as client:
        while True:
            page = client.get("/v2/sandboxes", params={"limit": 100})  # both states
            page.raise_for_status()
            if not page.json():
                return
            for sbx in page.json():
                client.delete(f"/sandboxes/{sbx['sandboxID']}")


def _measure(args: argparse.Namespace, url: str, key: str, data_dir: Path) -> None:
    from playwright.sync_api import sync_playwright

    pid = _server_pid(data_dir)
    began = time.monotonic()
    ids = asyncio.run(_create(url, key, args.n))
    print(f"{len(ids)} sandboxes created in {time.monotonic() - began:.0f} s", flush=True)
    _api_at_scale(url, key, args.n)
    idle = _core_pct(pid, args.seconds)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page()
        page.goto(f"{url}/ui/")
        page.fill("#credential", key)
        page.click("#signin")
        page.wait_for_selector("#who")
        renders = []
        for _ in range(args.renders):
            started = time.perf_counter()
            page.goto(f"{url}/ui/fleet")
            page.wait_for_function(
                "([n, shown]) => document.getElementById('page-range')?.textContent"
                ".endsWith(' of ' + n) && document.querySelectorAll("
                "'#fleet-body tr[data-id]').length === shown",
                arg=[args.n, min(args.n, PER_PAGE)], timeout=120_000)
            renders.append((time.perf_counter() - started) * 1000)
        page.wait_for_selector("#live.on")
        live = _core_pct(pid, args.seconds)
        browser.close()
    print(f"fleet of {args.n}: first render p50 {statistics.median(renders):.0f} ms, "
          f"p99 {pct(renders, 0.99):.0f} ms (n={len(renders)})")
    print(f"server CPU, page open and live: {live:.2f} % of one core; "
          f"no page (floor): {idle:.2f} %; the page's share: {live - idle:.2f} %")


if __name__ == "__main__":
    main()
