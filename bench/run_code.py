"""Code-interpreter latency: the kernel server next to a bare jupyter_client, same kernel.

Starts the real kernel server (`python -m bac_kernel`) on loopback and measures, on its
warm default Python context:

  1+1          `run_code("1+1")` round trip
  dataframe    a cell whose value is a ~1 MB DataFrame (its `data` JSON is ~1 MB)

each three ways, interleaved in rounds so machine load hits all of them alike:

  sdk          the official e2b-code-interpreter SDK's `Sandbox.run_code` (it opens a new
               HTTP/1.1 connection per call, as every user of the SDK does)
  http         POST /execute on one kept-alive connection, reading NDJSON to the end
  floor        the same code sent by a bare jupyter_client BlockingKernelClient connected
               to the *same* kernel (via its connection file), reading iopub to idle and
               the execute_reply — what any Jupyter-based server must pay

It also times a cold start: server process spawned → first `1+1` result (kernel started
ahead by the server), next to a bare AsyncKernelManager start + first result.

With ``--sandbox N`` it also starts real Bac servers (as root) and times Bac's SDK from
``Sandbox.create("code-interpreter-v1")`` to the first `1+1` result, N times without a
warm pool (``BAC_POOL_SIZE=0``) and N times with one (the pool refilled between creates),
plus ``--burst K`` sandboxes created at once (each one's create → first result, and the
slowest). Each is printed next to the cold-start floor of the same run (a bare kernel's
start and first result) and the issue's targets (150 ms p50, a burst of 10 within 2 s).

    .venv/bin/python bench/run_code.py [-n 300] [--df-n 30] [--cold 3] [--sandbox 3]
                                       [--burst 10]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from e2b_code_interpreter import Sandbox
from jupyter_client.blocking.client import BlockingKernelClient

ROUND = 25
DF_ROWS = 26_000
MAKE_DF = (
    "import numpy as np, pandas as pd\n"
    f"bench_df = pd.DataFrame({{'n': np.arange({DF_ROWS}), 'x': np.random.default_rng(1)"
    f".random({DF_ROWS}), 's': ['abcdefghij'] * {DF_ROWS}}})"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(cwd: str) -> tuple[subprocess.Popen[bytes], str, float]:
    """Spawn the server; returns it, its URL and the time it was spawned."""
    port = _free_port()
    read_end, write_end = os.pipe()
    spawned = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bac_kernel", "--host", "127.0.0.1", "--port", str(port),
         "--cwd", cwd, "--envd-url", "", "--ready-fd", str(write_end)],
        pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], 120)
    if not ready or os.read(read_end, 16) != b"ready\n":
        proc.kill()
        sys.exit("kernel server did not become ready")
    os.close(read_end)
    return proc, f"http://127.0.0.1:{port}", spawned


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(30)


def http_run(client: httpx.Client, url: str, code: str) -> int:
    """One /execute on a kept-alive connection; returns the bytes of the result lines."""
    size = 0
    with client.stream("POST", f"{url}/execute", json={"code": code}) as response:
        for line in response.iter_lines():
            if '"type":"result"' in line[:20]:
                size += len(line)
    return size


def floor_client(url: str) -> BlockingKernelClient:
    """A bare jupyter_client connected to the server's default Python kernel."""
    sandbox = Sandbox.create(debug=True, sandbox_url=url)
    path = sandbox.run_code(
        "from ipykernel.kernelapp import IPKernelApp\nIPKernelApp.instance().connection_file"
    ).text
    client = BlockingKernelClient()
    client.load_connection_file(str(path))
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return client


def floor_run(client: BlockingKernelClient, code: str, *, measure_size: bool = False) -> int:
    msg_id = client.execute(code)
    size = 0
    while True:
        msg = client.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if measure_size and msg["msg_type"] == "execute_result":
            size += len(json.dumps(msg["content"]["data"]))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    while client.get_shell_msg(timeout=120)["parent_header"].get("msg_id") != msg_id:
        pass
    return size


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


def measure(runs: dict[str, Callable[[], object]], n: int) -> dict[str, list[float]]:
    """`n` timed calls of each run, interleaved in rounds of ROUND."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    while len(times[next(iter(runs))]) < n:
        for name, run in runs.items():
            run()  # untimed: lets the server drain the floor client's iopub traffic
            for _ in range(min(ROUND, n - len(times[name]))):
                start = time.perf_counter()
                run()
                times[name].append((time.perf_counter() - start) * 1000)
    return times


def report(title: str, times: dict[str, list[float]]) -> None:
    floor_p50, floor_p99 = percentiles(times["floor"])
    print(f"\n{title}")
    print(f"  {'':8} {'p50 ms':>9} {'p99 ms':>9} {'p50/floor':>10} {'p99/floor':>10}")
    for name, samples in times.items():
        p50, p99 = percentiles(samples)
        print(f"  {name:8} {p50:9.2f} {p99:9.2f} {p50 / floor_p50:10.2f} {p99 / floor_p99:10.2f}")


def cold_start(cwd: str, n: int) -> float:
    """Prints the server's cold start next to a bare kernel's; returns that floor's p50."""
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    server: list[float] = []
    floor: list[float] = []
    for _ in range(n):
        proc, url, spawned = start_server(cwd)
        try:
            sandbox = Sandbox.create(debug=True, sandbox_url=url)
            assert sandbox.run_code("1+1").text == "2"
            server.append((time.perf_counter() - spawned) * 1000)
        finally:
            stop_server(proc)

        async def bare() -> float:
            start = time.perf_counter()
            manager = AsyncKernelManager(kernel_name="python3")
            await manager.start_kernel(cwd=cwd)
            client = manager.client()
            client.start_channels()
            await client.wait_for_ready(timeout=120)
            msg_id = client.execute("1+1")
            while True:
                msg = await client.get_iopub_msg()
                mine = msg["parent_header"].get("msg_id") == msg_id
                if mine and msg["msg_type"] == "execute_result":
                    break
            elapsed = (time.perf_counter() - start) * 1000
            client.stop_channels()
            await manager.shutdown_kernel(now=True)
            return elapsed

        floor.append(asyncio.run(bare()))
    s50, f50 = statistics.median(server), statistics.median(floor)
    print("\ncold start → first 1+1 result (server: spawn → ready → kernel → result)")
    print(f"  server p50 {s50:8.1f} ms   floor (bare kernel start) p50 {f50:8.1f} ms   "
          f"ratio {s50 / f50:.2f}   (n={n})")  # fmt: skip
    return f50


def _first_result(opts: dict[str, object]) -> float:
    """One create → `1+1` → kill; milliseconds from create to the result."""
    import bac

    start = time.perf_counter()
    with bac.Sandbox.create("code-interpreter-v1", timeout=120, **opts) as box:  # type: ignore[arg-type]
        assert box.run_code("1+1").text == "2"
        return (time.perf_counter() - start) * 1000


def _line(label: str, times: list[float], floor: float | None) -> None:
    p50, p99 = percentiles(times)
    ratio = f"   p50/floor {p50 / floor:6.2f}" if floor else ""
    print(f"  {label:26} p50 {p50:8.1f} ms   p99 {p99:8.1f} ms   max {max(times):8.1f} ms"
          f"{ratio}   (n={len(times)})")


def through_server(n: int, burst: int, floor: float | None) -> None:
    """Bac's SDK through real servers: create a code-interpreter sandbox → first result,
    without and with a warm pool, and a burst created at once."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration",
                                    "sdk"))
    from sdk_server import running_server

    print("\nsandbox create → first 1+1 result (bac SDK, real server; target p50 150 ms)")
    from _warm import wait_start_snapshots

    for pool in (0, 2):
        # pool 0: no sandbox made ahead at all, each create restores the start snapshot.
        os.environ.update(BAC_POOL_SIZE=str(pool), BAC_START_SNAPSHOT_POOL=str(min(pool, 1)),
                          BAC_POOL_MAX=str(pool))
        with running_server() as server:
            opts = server.opts()
            _first_result(opts)  # boots; the template's start snapshot is taken after it
            ready = wait_start_snapshots(Path(server.env["BAC_DATA_DIR"]))
            print(f"  start snapshots ready: {ready}")
            times = []
            for _ in range(n):
                if pool:
                    time.sleep(3)  # a benchmark may wait: lets the pool refill
                times.append(_first_result(opts))
            _line(f"pool {pool}", times, floor)
            if burst and pool == 0:
                with ThreadPoolExecutor(burst) as workers:
                    started = time.perf_counter()
                    each = list(workers.map(_first_result, [opts] * burst))
                    whole = (time.perf_counter() - started) * 1000
                _line(f"burst of {burst} (pool 0)", each, floor)
                print(f"  {'':26} all {burst} answered within {whole:8.1f} ms (target 2000 ms)")
    for name in ("BAC_POOL_SIZE", "BAC_START_SNAPSHOT_POOL", "BAC_POOL_MAX"):
        os.environ.pop(name, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="samples per 1+1 variant")
    parser.add_argument("--df-n", type=int, default=30, help="samples per DataFrame variant")
    parser.add_argument("--cold", type=int, default=3, help="cold starts (0 to skip)")
    parser.add_argument("--sandbox", type=int, default=0,
                        help="sandbox create → first result through a real server (root)")
    parser.add_argument("--burst", type=int, default=10,
                        help="with --sandbox: sandboxes created at once (0 to skip)")
    args = parser.parse_args()
    print(f"machine load: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as cwd:
        proc, url, _ = start_server(cwd)
        try:
            sandbox = Sandbox.create(debug=True, sandbox_url=url)
            http = httpx.Client(timeout=120)
            floor = floor_client(url)
            for _ in range(20):  # warm every path
                sandbox.run_code("1+1")
                http_run(http, url, "1+1")
                floor_run(floor, "1+1")
            report("run_code('1+1') on a warm context", measure({
                "sdk": lambda: sandbox.run_code("1+1"),
                "http": lambda: http_run(http, url, "1+1"),
                "floor": lambda: floor_run(floor, "1+1"),
            }, args.n))  # fmt: skip
            sandbox.run_code(MAKE_DF)
            size = http_run(http, url, "bench_df") / 1e6
            raw = floor_run(floor, "bench_df", measure_size=True) / 1e6
            print(f"\nDataFrame result: {DF_ROWS} rows; NDJSON result line {size:.2f} MB, "
                  f"kernel message data {raw:.2f} MB (data + text + html)")  # fmt: skip
            report("1 MB DataFrame result", measure({
                "sdk": lambda: sandbox.run_code("bench_df"),
                "http": lambda: http_run(http, url, "bench_df"),
                "floor": lambda: floor_run(floor, "bench_df"),
            }, args.df_n))  # fmt: skip
            floor.stop_channels()
        finally:
            stop_server(proc)
        cold_floor = cold_start(cwd, args.cold) if args.cold else None
    if args.sandbox:
        through_server(args.sandbox, args.burst, cold_floor)
    print(f"\nmachine load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
