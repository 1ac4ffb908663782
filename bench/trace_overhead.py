"""What the trace adds to a command: ``commands.run("true")`` through envd, reports on
next to reports off, in the same run.

Starts two real envds on the host (``python -m bac_envd``, as the SDK's integration tests
do), initialised like a sandbox's: one reports each process to a unix datagram socket
this script binds and drains with an asyncio datagram endpoint (what the server does),
the other has reports off (``BAC_ENVD_TRACE_SOCKET=""``: the floor). Bac's SDK runs
``true`` on each in alternating rounds, one kept-alive connection each, so machine load
hits both alike. Prints the medians, p90 and p99 of both, the difference of the medians
and their ratio, and checks that every traced command's report arrived.

    .venv/bin/python bench/trace_overhead.py [-n 1000] [--round 50]
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bac import AsyncSandbox
from bac._api import ApiClient
from bac._config import ConnectionConfig


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Envd:
    def __init__(self, workdir: Path, trace_socket: str) -> None:
        self.port = free_port()
        read_fd, write_fd = os.pipe()
        env = {**os.environ, "BAC_ENVD_TRACE_SOCKET": trace_socket}
        self.log = (workdir / f"envd-{self.port}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bac_envd", "--host", "127.0.0.1", "--port",
             str(self.port), "--ready-fd", str(write_fd), "--preload"],
            pass_fds=(write_fd,), stdout=self.log, stderr=subprocess.STDOUT, env=env)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as ready:
            if ready.readline() != b"ready\n":
                sys.exit(f"envd did not start, see {self.log.name}")
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(16)
        # ``nobody`` when envd runs as root: its login shell reads /etc/profile only, not
        # whatever this host's root profile starts (a sandbox's user has a plain one too).
        user = "nobody" if os.geteuid() == 0 else getpass.getuser()
        done = httpx.post(f"{self.url}/init", json={
            "accessToken": self.token, "defaultUser": user,
            "defaultWorkdir": str(workdir)}, timeout=30)
        done.raise_for_status()

    def sandbox(self) -> AsyncSandbox:
        config = ConnectionConfig.resolve(api_key="unused", sandbox_url=self.url, env={})
        record = {"sandboxID": f"bench{self.port}", "envdVersion": "0.6.13",
                  "envdAccessToken": self.token}
        return AsyncSandbox(ApiClient(config), record)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


class Drain(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.reports: list[dict[str, object]] = []

    def datagram_received(self, data: bytes, addr: object) -> None:
        self.reports.append(json.loads(data))


def report_cost(path: str, n: int = 2000) -> list[float]:
    """Microseconds per call of the code a finished process adds (a typical report)."""
    from bac_envd import _trace

    fields: dict[str, object] = {
        "pid": 1234, "cmd": "/bin/bash -l -c true", "user": "user", "cwd": "/home/user",
        "tag": None, "pty": False, "started_at": time.time(), "duration_ms": 3.2,
        "stdout_bytes": 0, "stderr_bytes": 0, "timed_out": False, "client_left": False,
        "exit_code": 0}
    spent = []
    for _ in range(n):
        start = time.perf_counter()
        _trace.report("process", fields, path)
        spent.append((time.perf_counter() - start) * 1e6)
    return spent


def summary(name: str, ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    q = statistics.quantiles(ms, n=100)
    row = {"p50": statistics.median(ms), "p90": q[89], "p99": q[98]}
    print(f"  {name:<12} p50 {row['p50']:7.3f} ms   p90 {row['p90']:7.3f}   "
          f"p99 {row['p99']:7.3f}   (n={len(ms)})")
    return row


def make_workdir() -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="bac-trace-bench-"))
    workdir.chmod(0o755)  # the commands' user (nobody, under root) works in it
    return workdir


async def main(n: int, per_round: int) -> None:
    workdir = make_workdir()
    path = str(workdir / "trace.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    transport, drain = await loop.create_datagram_endpoint(Drain, sock=sock)
    traced, floor = Envd(workdir, path), Envd(workdir, "")
    boxes = {"reports on": traced.sandbox(), "reports off": floor.sandbox()}
    times: dict[str, list[float]] = {name: [] for name in boxes}
    try:
        for box in boxes.values():  # warm: the RPC stack loaded, connections open
            for _ in range(20):
                await box.commands.run("true")
        warm_reports = len(drain.reports)
        rounds = max(1, n // per_round)
        for i in range(rounds):
            order = list(boxes.items()) if i % 2 == 0 else list(reversed(boxes.items()))
            for name, box in order:
                for _ in range(per_round):
                    start = time.perf_counter()
                    await box.commands.run("true")
                    times[name].append((time.perf_counter() - start) * 1000)
        # Every traced command reported (the drain runs on this loop: let it catch up).
        want = warm_reports + rounds * per_round
        for _ in range(200):
            if len(drain.reports) >= want:
                break
            await asyncio.sleep(0.01)
        print(f"run(\"true\") through envd, {rounds} rounds of {per_round}:")
        on = summary("reports on", times["reports on"])
        off = summary("reports off", times["reports off"])
        print(f"  added p50 {on['p50'] - off['p50']:+.3f} ms   ratio p50 "
              f"{on['p50'] / off['p50']:.3f}   added p99 {on['p99'] - off['p99']:+.3f} ms")
        direct = report_cost(path)
        print(f"  one report itself (bac_envd._trace.report, same socket): p50 "
              f"{statistics.median(direct):.1f} us   p99 "
              f"{statistics.quantiles(direct, n=100)[98]:.1f} us")
        print(f"  reports received {len(drain.reports) - warm_reports} of "
              f"{rounds * per_round}; unsent counts seen: "
              f"{sum(1 for r in drain.reports if 'unsent' in r)}")
    finally:
        for box in boxes.values():
            await box.aclose()
        traced.stop()
        floor.stop()
        transport.close()
        os.unlink(path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("--round", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.round))
