"""Time-to-interactive and command round trip through the official e2b SDK, next to floors.

Starts a real Bac server (fresh data dir, the machine's built templates), then measures:

* TTI: ``Sandbox.create()`` → first command's output (``echo``), over HTTP: sequential
  (n, each from a full pool); ``--concurrent`` at once (async SDK), with the built-in's
  start snapshot taken; the same burst again once the pool has grown to that demand
  (``BAC_POOL_MAX``) and refilled; ``--sustained`` back to back with no waiting;
* command round trip: ``commands.run("true")`` on a live sandbox, through the gateway and,
  for comparison, straight to the sandbox's envd (the gateway's share);
* floors measured in the same run: ``crun run`` of ``/bin/true`` on the template's rootfs,
  a local ``subprocess.run(["true"])``, and inside the sandbox the ``bash -l -c true``
  spawn every command pays.

    .venv/bin/python bench/tti.py [-n 30] [--concurrent 50] [--pool 8] [--sustained 200]

Targets on the 2-vCPU reference machine: TTI p50 ≤ 50 ms, command round trip p50 ≤ 5 ms;
issue 21's: 50 at once ≤ 1.5 s, sustained p50 ≤ 30 ms, round trip ≤ 1.3x the in-sandbox
spawn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
from _warm import wait_start_snapshots

TEMPLATES_DIR = Path(os.environ.get("BAC_TEMPLATES_DIR", "/var/lib/bac"))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _row(name: str, values: list[float]) -> str:
    return (f"{name:<44} n={len(values):<4} p50 {statistics.median(values):8.2f} ms"
            f"   p99 {_pct(values, 99):8.2f} ms")


def _timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


@contextlib.contextmanager
def bac_server(pool: int, **extra_env: str) -> Iterator[tuple[str, str, Path]]:
    data_dir = Path(tempfile.mkdtemp(prefix="bac-bench-"))
    data_dir.chmod(0o711)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "BAC_"))}
    env.update(BAC_HOST="127.0.0.1", BAC_PORT=str(port), BAC_DATA_DIR=str(data_dir),
               BAC_TEMPLATES_DIR=str(TEMPLATES_DIR), BAC_POOL_SIZE=str(pool),
               BAC_MAX_SANDBOXES_PER_TEAM="500")
    env.update(extra_env)
    log = (data_dir / "server.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-c", "from bac_server.admin import serve; serve()"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((data_dir / "server.log").read_text()[-3000:])
            time.sleep(0.1)
        from bac_server.admin import create_key

        yield url, create_key("bench", "bench", data_dir=data_dir), data_dir
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        log.close()
        if not any((data_dir / "sandboxes").glob("*")):
            shutil.rmtree(data_dir, ignore_errors=True)


def _wait_pool(data_dir: Path, size: int, deadline_s: float = 120) -> None:
    """Let the warm pool fill (pooled slots show up as slot records in phase 'pooled')."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        pooled = sum('"phase": "pooled"' in p.read_text()
                     for p in (data_dir / "sandboxes").glob("*/state.json"))
        if pooled >= size:
            return
        time.sleep(0.2)


def tti_sequential(n: int, data_dir: Path, pool: int) -> list[float]:
    from e2b import Sandbox

    times = []
    for _ in range(n):
        _wait_pool(data_dir, pool, 30)  # measure hand-out from a full pool, as in steady use
        start = time.perf_counter()
        sbx = Sandbox.create()
        out = sbx.commands.run("echo ready").stdout
        times.append((time.perf_counter() - start) * 1000)
        assert out == "ready\n"
        sbx.kill()
    return times


async def _tti_concurrent(count: int) -> tuple[list[float], float]:
    from e2b import AsyncSandbox

    async def one() -> tuple[float, AsyncSandbox]:
        start = time.perf_counter()
        sbx = await AsyncSandbox.create()
        assert (await sbx.commands.run("echo ready")).stdout == "ready\n"
        return (time.perf_counter() - start) * 1000, sbx

    start = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(count)))
    wall = (time.perf_counter() - start) * 1000
    await asyncio.gather(*(s.kill() for _, s in results))
    return [t for t, _ in results], wall


def tti_sustained(n: int) -> list[float]:
    """Create + first output, back to back with no waiting (each killed after): the pool,
    whatever its size, cannot keep up, so most creates restore or boot."""
    from e2b import Sandbox

    times = []
    for _ in range(n):
        start = time.perf_counter()
        sbx = Sandbox.create()
        assert sbx.commands.run("echo ready").stdout == "ready\n"
        times.append((time.perf_counter() - start) * 1000)
        sbx.kill()
    return times


# Inside the sandbox: the spawn each command pays (envd starts it as `bash -l -c`).
_SPAWN_FLOOR = """
import subprocess, time
out = []
for _ in range({n}):
    t = time.perf_counter()
    subprocess.run(["/bin/bash", "-l", "-c", "true"], check=True)
    out.append((time.perf_counter() - t) * 1000)
print(" ".join(f"{{v:.3f}}" for v in out))
"""


def round_trips(n: int, data_dir: Path) -> tuple[list[float], list[float], list[float]]:
    """``run("true")`` through the gateway and straight to envd, and the in-sandbox floor
    (the same ``bash -l -c true`` spawned inside by a Python loop)."""
    from e2b import Sandbox

    sbx = Sandbox.create()
    try:
        floor_out = sbx.commands.run(f"python3 -c '{_SPAWN_FLOOR.format(n=n)}'").stdout
        inside = [float(v) for v in floor_out.split()]
        for _ in range(10):
            sbx.commands.run("true")
        gateway = _timed(lambda: sbx.commands.run("true"), n)
        address = None
        for state in (data_dir / "sandboxes").glob("*/state.json"):
            record = json.loads(state.read_text())
            if record.get("sandbox_id") == sbx.sandbox_id:
                address = record["sandbox_address"]
        direct_sbx = Sandbox.connect(sbx.sandbox_id, sandbox_url=f"http://{address}:49983")
        for _ in range(10):
            direct_sbx.commands.run("true")
        direct = _timed(lambda: direct_sbx.commands.run("true"), n)
        return gateway, direct, inside
    finally:
        sbx.kill()


def crun_floor(n: int) -> list[float]:
    builds = sorted((TEMPLATES_DIR / "templates" / "base").glob("*/rootfs"))
    if not builds or shutil.which("crun") is None:
        return []
    bundle = Path(tempfile.mkdtemp(prefix="bac-bench-crun-"))
    try:
        subprocess.run(["crun", "spec"], cwd=bundle, check=True)
        config = json.loads((bundle / "config.json").read_text())
        config["process"].update(terminal=False, args=["/bin/true"])
        config["root"] = {"path": str(builds[-1]), "readonly": True}
        (bundle / "config.json").write_text(json.dumps(config))
        name = f"bacbench{os.getpid()}"

        def run() -> None:
            subprocess.run(["crun", "run", "--bundle", str(bundle), name], check=True,
                           stdout=subprocess.DEVNULL)

        run()
        return _timed(run, n)
    finally:
        shutil.rmtree(bundle, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="sequential TTI samples (>= 30)")
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--round-trips", type=int, default=200)
    parser.add_argument("--pool", type=int, default=8, help="warm pool size of the server")
    parser.add_argument("--sustained", type=int, default=200,
                        help="back-to-back create + echo, no waiting")
    args = parser.parse_args()

    subprocess_floor = _timed(lambda: subprocess.run(["true"], check=True), 100)
    crun = crun_floor(30)
    with bac_server(args.pool) as (url, key, data_dir):
        os.environ.update(E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=key)
        _wait_pool(data_dir, args.pool)
        sequential = tti_sequential(args.n, data_dir, args.pool)
        gateway_rt, direct_rt, inside_rt = round_trips(args.round_trips, data_dir)
        _wait_pool(data_dir, args.pool)
        snapshots = wait_start_snapshots(data_dir)
        print(f"start snapshots ready: {snapshots}")
        concurrent, wall = asyncio.run(_tti_concurrent(args.concurrent))
        # The burst grew the pool to its demand (BAC_POOL_MAX): once refilled, the same
        # burst again is handed out.
        _wait_pool(data_dir, min(args.concurrent, 32), 180)
        again, wall_again = asyncio.run(_tti_concurrent(args.concurrent))
        sustained = tti_sustained(args.sustained)

    print(f"\nBac time-to-interactive bench (warm pool {args.pool}, official e2b SDK over HTTP)")
    print(_row("floor: local subprocess.run(['true'])", subprocess_floor))
    if crun:
        print(_row("floor: crun run /bin/true (template rootfs)", crun))
    print(_row("TTI sequential: create -> first output", sequential))
    print(_row(f"TTI {args.concurrent} concurrent (per sandbox)", concurrent))
    print(f"{'TTI ' + str(args.concurrent) + ' concurrent: all ready (wall)':<44} {wall:8.1f} ms")
    print(_row(f"TTI {args.concurrent} again, pool grown (per sandbox)", again))
    print(f"{'TTI ' + str(args.concurrent) + ' again: all ready (wall)':<44} {wall_again:8.1f} ms")
    print(_row(f"TTI sustained, {args.sustained} back to back", sustained))
    print(_row("command round trip run('true') via gateway", gateway_rt))
    print(_row("command round trip run('true') direct envd", direct_rt))
    print(_row("floor: bash -l -c true spawned inside", inside_rt))
    p50 = statistics.median
    if crun:
        print(f"ratio TTI p50 / crun floor p50:              {p50(sequential) / p50(crun):6.1f}x")
    print(f"ratio round trip p50 / subprocess floor p50: "
          f"{p50(gateway_rt) / p50(subprocess_floor):6.1f}x")
    print(f"ratio round trip p50 / in-sandbox spawn p50: "
          f"{p50(gateway_rt) / p50(inside_rt):6.1f}x")
    print(f"gateway share of the round trip (p50):       "
          f"{p50(gateway_rt) - p50(direct_rt):+6.2f} ms")
    print(f"targets: TTI p50 <= 50 ms -> {'met' if p50(sequential) <= 50 else 'NOT met'}; "
          f"round trip p50 <= 5 ms -> {'met' if p50(gateway_rt) <= 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
