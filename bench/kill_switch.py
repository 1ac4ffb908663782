"""Benchmark: the kill switch on a fleet of running sandboxes.

Starts the real server in this process (store, backend, gateway, API: the tests'
``inprocess_server``), creates ``-n`` sandboxes of one run (metadata ``bench=kill-switch``)
and, for each of ``--rounds`` rounds, pauses them all with ``POST /admin/fleet/pause``:

* *answer*: the request's wall time, from sending it until the answer (every sandbox
  frozen, its row written), and *frozen*: the server's own time to freeze them all
  (``frozenMs``);
* *on disk*: from sending the request until every sandbox is written to disk with its
  memory (the switch's background suspends done, and each suspend flushed through);

then releases and resumes them (``connect``) for the next round. At the end a kill of the
whole run is timed the same way (answer; all ended).

The floors, measured in the same run on the same sandboxes: *one cgroup by hand* (write
``FROZEN`` to one sandbox's ``freezer.state`` and read it until the kernel says FROZEN,
then thaw; v2: ``cgroup.freeze`` and ``cgroup.events``), and *all cgroups by hand* (write
``FROZEN`` to every sandbox's cgroup, then wait until all are FROZEN). Prints median and
p99 over the rounds (the floors over their repetitions) and the ratios. Run as root when
nothing else loads the machine (``uptime``: load under 1.5):

    .venv/bin/python bench/kill_switch.py [-n 200] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from _stats import pct  # bench/, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration" / "server"))
sys.path.insert(0, str(ROOT / "tests" / "compat"))

from inprocess_server import InProcessServer, inprocess_server  # noqa: E402

from bac_server.backends.namespaces import NamespaceBackend, testing  # noqa: E402
from bac_server.control import PauseKind  # noqa: E402

TOKEN = "bench-kill-switch-" + os.urandom(16).hex()
RUN = {"bench": "kill-switch"}
TARGET_FROZEN_MS = 1000.0  # the issue's: 200 running sandboxes frozen in <= 1 s


def report(label: str, values: list[float], floor: float | None = None) -> dict[str, Any]:
    p50, p99 = pct(values, 0.5), pct(values, 0.99)
    ratio = f"{p50 / floor:7.1f}x floor" if floor else ""
    print(f"  {label:<46} median {p50:9.1f} ms  p99 {p99:9.1f} ms  {ratio}  (n={len(values)})")
    return {"label": label, "median_ms": round(p50, 2), "p99_ms": round(p99, 2),
            "n": len(values), "ratio_to_floor": round(p50 / floor, 2) if floor else None}


# -- the floors: the kernel's freezer written by hand ------------------------------------

class Freezer:
    """A sandbox's freezer cgroup, written directly (cgroup v1 or v2)."""

    def __init__(self, backend: NamespaceBackend, sandbox_id: str) -> None:
        slot = (backend.config.claims_dir / sandbox_id).read_text().strip()
        v1 = Path("/sys/fs/cgroup/freezer/bac") / slot
        self.v2 = not v1.is_dir()
        self.dir = Path("/sys/fs/cgroup/bac") / slot if self.v2 else v1
        if not self.dir.is_dir():
            raise SystemExit(f"no freezer cgroup for {sandbox_id} at {self.dir}")

    def set(self, frozen: bool) -> None:
        if self.v2:
            (self.dir / "cgroup.freeze").write_text("1" if frozen else "0")
        else:
            (self.dir / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def frozen(self) -> bool:
        if self.v2:
            return "frozen 1" in (self.dir / "cgroup.events").read_text()
        return (self.dir / "freezer.state").read_text().strip() == "FROZEN"

    def thawed(self) -> bool:
        if self.v2:
            return "frozen 0" in (self.dir / "cgroup.events").read_text()
        return (self.dir / "freezer.state").read_text().strip() == "THAWED"


def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():  # the freezer has no notification on v1: poll, as the backend does
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not happen in 30 s")
        time.sleep(0.0002)


def floor_one(freezer: Freezer, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        freezer.set(True)
        _until(freezer.frozen, "a freeze")
        times.append((time.perf_counter() - started) * 1000)
        freezer.set(False)
        _until(freezer.thawed, "a thaw")
    return times


def floor_all(freezers: list[Freezer], reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        for f in freezers:
            f.set(True)
        for f in freezers:
            _until(f.frozen, "a freeze")
        times.append((time.perf_counter() - started) * 1000)
        for f in freezers:
            f.set(False)
        for f in freezers:
            _until(f.thawed, "a thaw")
    return times


# -- the switch --------------------------------------------------------------------------

async def create_fleet(server: InProcessServer, n: int, concurrency: int) -> list[str]:
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=server.url, timeout=300,
                                 headers={"X-API-KEY": server.keys[0]}) as api:
        async def one() -> str | None:
            async with gate:
                made = await api.post("/v2/sandboxes", json={
                    "templateID": "base", "timeout": 3600, "metadata": RUN})
                if made.status_code != 201:
                    print(f"create failed: {made.status_code} {made.text[:300]}")
                    return None
                return str(made.json()["sandboxID"])

        # Every create finishes before a failure stops the bench (none left half-made).
        made = await asyncio.gather(*(one() for _ in range(n)))
    ids = [i for i in made if i is not None]
    if len(ids) < n:
        raise SystemExit(f"only {len(ids)} of {n} sandboxes could be made on this machine")
    return ids


async def switch(admin: httpx.AsyncClient, action: str) -> dict[str, Any]:
    done = await admin.post(f"/admin/fleet/{action}", json={"metadata": RUN})
    if done.status_code != 200:
        raise SystemExit(f"{action} failed: {done.status_code} {done.text}")
    answer: dict[str, Any] = done.json()
    return answer


async def resume_all(server: InProcessServer, ids: list[str], concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=server.url, timeout=300,
                                 headers={"X-API-KEY": server.keys[0]}) as api:
        async def one(sandbox_id: str) -> None:
            async with gate:
                done = await api.post(f"/sandboxes/{sandbox_id}/connect", json={"timeout": 3600})
                if done.status_code not in (200, 201):
                    raise SystemExit(f"resume of {sandbox_id} failed: {done.text}")

        await asyncio.gather(*(one(i) for i in ids))


async def pause_round(server: InProcessServer, admin: httpx.AsyncClient, backend:
                      NamespaceBackend, ids: list[str]) -> tuple[float, float, float]:
    started = time.perf_counter()
    answer = await switch(admin, "pause")
    answered = (time.perf_counter() - started) * 1000
    if answer["count"] != len(ids) or answer["failed"]:
        raise SystemExit(f"the pause froze {answer['count']} of {len(ids)}: {answer['failed']}")
    await server.plane.kill_switch.settled()
    await asyncio.gather(*(testing.suspend_flushed(backend, i) for i in ids))
    on_disk = (time.perf_counter() - started) * 1000
    for sandbox_id in ids:
        sbx = server.plane.registry.get(sandbox_id)
        if sbx is None or sbx.paused_as is not PauseKind.DISK:
            raise SystemExit(f"{sandbox_id} is not on disk after the switch")
    return answered, float(answer["frozenMs"]), on_disk


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=200, help="running sandboxes (200)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--floor-reps", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=6,
                        help="creates and resumes at once while setting up (6)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (run when under 1.5)")
    async with inprocess_server("bench-kill-switch", admin_token=TOKEN,
                                max_sandboxes_per_team=args.n + 10) as server:
        backend = server.plane.backend
        assert isinstance(backend, NamespaceBackend)
        began = time.perf_counter()
        ids = await create_fleet(server, args.n, args.concurrency)
        print(f"{args.n} sandboxes running (made in {time.perf_counter() - began:.0f} s)")
        freezers = [Freezer(backend, i) for i in ids]
        one = floor_one(freezers[0], args.floor_reps)
        every = floor_all(freezers, max(3, args.rounds))
        answers, frozen, disks = [], [], []
        async with httpx.AsyncClient(base_url=server.url, timeout=600, headers={
                "Authorization": f"Bearer {TOKEN}"}) as admin:
            for round_ in range(args.rounds):
                answered, froze, on_disk = await pause_round(server, admin, backend, ids)
                answers.append(answered)
                frozen.append(froze)
                disks.append(on_disk)
                print(f"round {round_ + 1}: answer {answered:.0f} ms (frozen {froze:.0f} ms), "
                      f"all on disk {on_disk:.0f} ms")
                await switch(admin, "release")
                await resume_all(server, ids, args.concurrency)
            started = time.perf_counter()
            killed = await switch(admin, "kill")
            kill_answer = (time.perf_counter() - started) * 1000
            await server.plane.kill_switch.settled()
            kill_all = (time.perf_counter() - started) * 1000
            if killed["count"] != len(ids) or server.plane.registry.all():
                raise SystemExit("the kill left sandboxes behind")
        floor = pct(every, 0.5)
        print(f"\nkill switch on {args.n} running sandboxes (load now "
              f"{os.getloadavg()[0]:.2f}):")
        rows = [
            report("floor: one cgroup frozen by hand", one),
            report(f"floor: {args.n} cgroups frozen by hand", every),
            report("pause: request to answer (all frozen)", answers, floor),
            report("pause: frozen (server's frozenMs)", frozen, floor),
            report("pause: request to all on disk", disks, floor),
            report("kill: request to answer (all frozen)", [kill_answer], floor),
            report("kill: request to all ended", [kill_all], floor),
        ]
        print(f"  {args.n} x one cgroup by hand: {pct(one, 0.5) * args.n:.1f} ms; target: "
              f"all frozen in <= {TARGET_FROZEN_MS:.0f} ms "
              f"({'met' if pct(answers, 0.5) <= TARGET_FROZEN_MS else 'missed'} at the median)")
        if args.json:
            print(json.dumps({"n": args.n, "rounds": args.rounds, "rows": rows}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
