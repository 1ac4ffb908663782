"""Benchmark: killing one sandbox, alone and beside a fleet, through the official SDK.

Starts a real Bac server (fresh data dir, the machine's built templates, warm pool 1),
then times ``Sandbox.kill`` (the request until the answer: the sandbox's whole teardown,
processes to files) on ``--kills`` sandboxes of ``base``, one after the other:

* *alone*: each created right before its kill, nothing else running (the floor of this
  run: the same kill with no fleet beside it);
* *beside N*: with ``-n`` sandboxes alive (created in batches of 25, each with a 1 h
  timeout), the first ``--kills`` of them killed in turn.

What grows with the fleet is what a teardown reads or walks that every sandbox adds to
(the host's mount table, the network's tables). Prints p50 and p99 of each, the ratio of
the medians, and the host's mount count beside the fleet. Run as root when nothing else
loads the machine:

    .venv/bin/python bench/kill.py [-n 300] [--kills 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

from tti import _row, bac_server  # bench/, beside this script


def _timed_kills(ids: list[str]) -> list[float]:
    from e2b import Sandbox

    times = []
    for sandbox_id in ids:
        start = time.perf_counter()
        assert Sandbox.kill(sandbox_id)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _alone(kills: int) -> list[float]:
    from e2b import Sandbox

    times = []
    for _ in range(kills):
        sandbox_id = Sandbox.create().sandbox_id
        times += _timed_kills([sandbox_id])
    return times


async def _fleet(n: int) -> list[str]:
    from e2b import AsyncSandbox

    made: list[str] = []
    for start in range(0, n, 25):
        batch = await asyncio.gather(*(AsyncSandbox.create(timeout=3600)
                                       for _ in range(min(25, n - start))))
        made += [s.sandbox_id for s in batch]
    return made


async def _kill_all(ids: list[str]) -> None:
    from e2b import AsyncSandbox

    for start in range(0, len(ids), 25):
        await asyncio.gather(*(AsyncSandbox.kill(s) for s in ids[start:start + 25]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="sandboxes alive beside the kills")
    parser.add_argument("--kills", type=int, default=30)
    args = parser.parse_args()
    if args.n < args.kills:
        parser.error("-n must be at least --kills")

    with bac_server(1) as (url, key, _data_dir):
        os.environ.update(E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=key)
        alone = _alone(args.kills)
        fleet = asyncio.run(_fleet(args.n))
        mounts = len(Path("/proc/self/mountinfo").read_text().splitlines())
        beside = _timed_kills(fleet[:args.kills])
        asyncio.run(_kill_all(fleet[args.kills:]))

    print("\nBac kill bench (official e2b SDK over HTTP, template base, warm pool 1)")
    print(_row("kill, alone (floor)", alone))
    print(_row(f"kill beside {args.n} ({mounts} mounts)", beside))
    print(f"ratio p50 beside / alone: {statistics.median(beside) / statistics.median(alone):.1f}x")


if __name__ == "__main__":
    main()
