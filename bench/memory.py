"""Memory of idle sandboxes after one command, next to a floor measured in the same run.

Starts a real Bac server (a fresh data dir, the machine's built templates, no pool), lets
the built-in's start snapshot be taken, then creates ``--n`` ``base`` sandboxes through
the official SDK (``--batch`` at once), runs one command in each, and reports:

* PSS of each sandbox's processes (``/proc/<pid>/smaps_rollup`` of every process in its
  cgroup): the whole sandbox, its PID 1 (envd's keeper) and envd;
* the host's ``MemAvailable`` before the creates and after, per sandbox (kernel memory,
  page tables and the slots' mounts included, and whatever the server grew by);
* floor: an idle ``python3 -s -S`` started in one of the sandboxes, the interpreter envd
  runs on with nothing imported.

    sudo .venv/bin/python bench/memory.py [--n 200] [--batch 25]

Issue 21's targets: an idle sandbox after a command ≤ 8 MiB; 1000 sandboxes ≤ 10 GiB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

from _pss import pss_mib, slot_of, slot_pids  # bench/, beside this script
from _stats import pct
from _warm import wait_start_snapshots
from tti import bac_server

_FLOOR = "python3 -s -S -c 'import time; time.sleep(3600)'"


def _mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def _pid_inside(pid: int) -> int:
    """The process's pid in its sandbox's pid namespace (the last of ``NSpid``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return 0


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def _make(n: int, batch: int) -> list[object]:
    from e2b import AsyncSandbox

    async def one() -> AsyncSandbox:
        sbx = await AsyncSandbox.create()
        assert (await sbx.commands.run("echo ready")).stdout == "ready\n"
        return sbx

    made: list[object] = []
    while len(made) < n:
        made += await asyncio.gather(*(one() for _ in range(min(batch, n - len(made)))))
    return made


async def _kill(sandboxes: list[object], batch: int) -> None:
    for start in range(0, len(sandboxes), batch):
        await asyncio.gather(*(sbx.kill()  # type: ignore[attr-defined]
                               for sbx in sandboxes[start:start + batch]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="idle sandboxes measured")
    parser.add_argument("--batch", type=int, default=25, help="creates at once")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds to wait after the last command before reading")
    args = parser.parse_args()

    # No pool and no growth to demand: the sandboxes alive are the ones measured.
    with bac_server(0, BAC_POOL_MAX="0", BAC_MAX_SANDBOXES_PER_TEAM=str(args.n + 10)
                    ) as (url, key, data_dir):
        os.environ.update(E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=key)
        from e2b import Sandbox

        first = Sandbox.create()
        first.commands.run("true")
        wait_start_snapshots(data_dir)
        first.kill()
        time.sleep(args.settle)  # the snapshot's stock laid out, the kill's teardown done
        before = _mem_available_mib()
        sandboxes = asyncio.run(_make(args.n, args.batch))
        time.sleep(args.settle)  # usage samplers, health probes and refills quiet again
        after = _mem_available_mib()

        whole: list[float] = []
        keeper: list[float] = []
        envd: list[float] = []
        for slot in (data_dir / "sandboxes").iterdir():
            pids = slot_pids(slot.name)
            if not pids:
                continue  # laid out ahead: nothing runs in it
            whole.append(sum(pss_mib(pid) for pid in pids))
            pid1 = [pid for pid in pids if _pid_inside(pid) == 1]
            keeper.append(sum(pss_mib(pid) for pid in pid1))
            envd.append(sum(pss_mib(pid) for pid in pids
                            if pid not in pid1 and b"bac_envd" in _cmdline(pid)))
        probe_id = sandboxes[0].sandbox_id  # type: ignore[attr-defined]
        probe_slot = slot_of(data_dir, probe_id)
        before_floor = set(slot_pids(probe_slot))
        Sandbox.connect(probe_id).commands.run(_FLOOR, background=True)
        time.sleep(2)  # the interpreter started and idle
        floor_pids = [pid for pid in slot_pids(probe_slot)
                      if pid not in before_floor and b"time.sleep" in _cmdline(pid)]
        floor = pss_mib(floor_pids[0]) if floor_pids else float("nan")
        # A server that stops leaves its sandboxes running (the next start re-attaches
        # them): these go now.
        asyncio.run(_kill(sandboxes, args.batch))

    def row(name: str, values: list[float]) -> str:
        return (f"{name:48} mean {statistics.mean(values):6.1f} MiB  p50 {pct(values, 0.5):6.1f}"
                f"  p99 {pct(values, 0.99):6.1f}")

    print(f"{len(whole)} base sandboxes alive, {args.n} of them idle after one command each")
    print(row("PSS, the whole sandbox", whole))
    print(row("PSS, its PID 1 (envd's keeper)", keeper))
    print(row("PSS, envd", envd))
    print(f"{'MemAvailable drop per sandbox':48} {(before - after) / args.n:6.1f} MiB"
          f"  ({before - after:.0f} MiB for {args.n})")
    print(f"{'floor: idle python3 -s -S in a sandbox, PSS':48} {floor:6.1f} MiB")
    print(f"ratio sandbox PSS mean / floor: {statistics.mean(whole) / floor:6.1f}x")


if __name__ == "__main__":
    main()
