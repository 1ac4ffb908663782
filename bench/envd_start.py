"""envd start-up and idle memory, next to the floor of a bare ``python3`` in the same run.

Builds a private copy of envd's code and dependencies (as the sandbox bundle does) and
byte-compiles it with the target interpreter, so the numbers include warm ``.pyc`` but
nothing host-specific. envd and the floor both run as ``python3 -S`` with only that
directory on ``PYTHONPATH``: ``-S`` keeps this host's site-packages ``.pth`` hooks (which
a sandbox image does not have) out of both sides.

Times, per start (exec of the interpreter → ...), for ``python3 -m bac_envd`` and for
``python3 -c 'from bac_envd.__main__ import main; main()'`` (no runpy, ~7 ms less):
  ready        the ``ready`` byte on ``--ready-fd`` (socket listening)
  health       first ``GET /health`` answered
  init         ``POST /init`` answered — what the host waits for before handing out
  first RPC    ``process.Process/List`` answered right after /init (loads asyncio, the
               server and the RPC stack; with ``--preload`` they load in the background)
Memory: RSS/PSS after /init (idle) and after the first RPC, mean over ``--instances``
envds running side by side, so pages they share (the interpreter, libraries) are split
as they would be between sandboxes built from one template.

    .venv/bin/python bench/envd_start.py [-n 30] [--instances 10] [--python /usr/bin/python3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _stats import pct  # bench/, beside this script

SRC = Path(__file__).resolve().parent.parent / "src"
GUEST = ("bac_envd", "bac_protocol")
THIRD_PARTY = (
    "connectrpc", "protobuf", "protobuf_ext", "pyqwest", "h11", "python_multipart",
    "inotify_simple", "typing_extensions",
)  # fmt: skip
HEALTH = b"GET /health HTTP/1.1\r\nHost: envd\r\nConnection: close\r\n\r\n"
RPC_HEADERS = "Content-Type: application/json\r\nConnect-Protocol-Version: 1\r\n"


def build_site(target: Path, python: str) -> None:
    """Copy envd + dependencies to ``target`` and compile them with ``python``."""
    for name in GUEST:
        shutil.copytree(SRC / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in THIRD_PARTY:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            sys.exit(f"{name} is not installed in this venv")
        if spec.submodule_search_locations:
            source = Path(next(iter(spec.submodule_search_locations)))
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(spec.origin, target / Path(spec.origin).name)
    compile_argv = [python, "-m", "compileall", "-q", "-j", "0"]
    compile_argv += ["--invalidation-mode", "unchecked-hash", str(target)]
    subprocess.run(compile_argv, check=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http(port: int, request: bytes) -> bytes:
    """Send one request (Connection: close) and return the whole reply."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def post(path: str, body: bytes, extra: str = "") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: envd\r\nContent-Length: {len(body)}\r\n{extra}"
    return (head + "Connection: close\r\n\r\n").encode() + body


def memory(pid: int) -> tuple[float, float]:
    """(RSS, PSS) in MiB from smaps_rollup."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            values[key] = int(rest.split()[0]) / 1024
    return values["Rss"], values["Pss"]


class Started:
    """One interpreter started with a ready pipe; times are ms since the exec."""

    def __init__(self, python: str, site: Path, argv: list[str]) -> None:
        read_fd, write_fd = os.pipe()
        env = {"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [python, "-S", *[a.replace("{fd}", str(write_fd)) for a in argv]],
            pass_fds=(write_fd,), env=env, stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            if pipe.readline() != b"ready\n":
                sys.exit("the process died before it was ready")
        self.ready = self.elapsed()

    def elapsed(self) -> float:
        return (time.perf_counter() - self.t0) * 1000

    def memory(self) -> tuple[float, float]:
        return memory(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def floor(python: str, site: Path) -> Started:
    code = "import os,sys; os.write({fd}, b'ready\\n'); sys.stdin.read(1)"
    return Started(python, site, ["-c", code])


RUNPY_FREE = ["-c", "from bac_envd.__main__ import main; main()"]


def envd(
    python: str, site: Path, preload: bool, entry: list[str] | None = None
) -> tuple[Started, int, dict[str, float]]:
    """Start envd, then do what the host does (health, init); returns times in ms."""
    port = free_port()
    argv = (entry or ["-m", "bac_envd"]) + ["--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ready-fd", "{fd}"] + (["--preload"] if preload else [])
    started = Started(python, site, argv)
    times = {"ready": started.ready}
    assert b" 204 " in http(port, HEALTH)
    times["health"] = started.elapsed()
    init = json.dumps({"defaultUser": "root", "defaultWorkdir": "/tmp"}).encode()
    assert b" 204 " in http(port, post("/init", init, "Content-Type: application/json\r\n"))
    times["init"] = started.elapsed()
    return started, port, times


def first_rpc(started: Started, port: int) -> float:
    assert b" 200 " in http(port, post("/process.Process/List", b"{}", RPC_HEADERS))
    return started.elapsed()


def row(label: str, values: list[float], floor_median: float) -> None:
    median = statistics.median(values)
    ratio = median / floor_median
    print(f"  {label:44} {median:7.1f} ms {pct(values, 0.99):7.1f} ms {ratio:7.2f}")


def timings(python: str, site: Path, runs: int) -> None:
    floors = []
    for _ in range(runs):
        started = floor(python, site)
        floors.append(started.ready)
        started.stop()
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        started, port, times = envd(python, site, False, RUNPY_FREE)
        started.stop()
        samples.setdefault("ready-c", []).append(times["ready"])
        samples.setdefault("init-c", []).append(times["init"])
    for preload in (False, True):
        for _ in range(runs):
            started, port, times = envd(python, site, preload)
            times["rpc"] = first_rpc(started, port)
            started.stop()
            for key, value in times.items():
                samples.setdefault(f"{key}{'+' if preload else ''}", []).append(value)
    base = statistics.median(floors)
    print(f"  {'exec → …':44} {'median':>10} {'p99':>10} {'÷ floor':>7}")
    row("floor: python3 -S writes ready", floors, base)
    row("envd: ready byte (socket listening)", samples["ready"], base)
    row("envd: first GET /health answered", samples["health"], base)
    row("envd: POST /init answered", samples["init"], base)
    row("envd: first RPC answered (lazy load)", samples["rpc"], base)
    row("envd via -c main(), no runpy: ready byte", samples["ready-c"], base)
    row("envd via -c main(), no runpy: /init answered", samples["init-c"], base)
    row("envd --preload: POST /init answered", samples["init+"], base)
    row("envd --preload: first RPC answered", samples["rpc+"], base)


def memory_table(python: str, site: Path, instances: int) -> None:
    floors = [floor(python, site) for _ in range(instances)]
    floor_rss = statistics.mean(f.memory()[0] for f in floors)
    floor_pss = statistics.mean(f.memory()[1] for f in floors)
    for started in floors:
        started.stop()
    print(f"\n  memory, mean of {instances} side by side {'RSS':>17} {'PSS':>9} {'PSS÷floor':>10}")
    print(f"  {'floor: idle python3 -S':40} {floor_rss:8.1f}M {floor_pss:8.1f}M {1:10.2f}")
    for preload in (False, True):
        runs = [envd(python, site, preload) for _ in range(instances)]
        idle = [started.memory() for started, _, _ in runs]
        for started, port, _ in runs:
            first_rpc(started, port)
        used = [started.memory() for started, _, _ in runs]
        for started, _, _ in runs:
            started.stop()
        mode = "envd --preload" if preload else "envd"
        for label, rows in ((f"{mode}: idle after /init", idle), (f"{mode}: after 1st RPC", used)):
            rss = statistics.mean(r[0] for r in rows)
            pss = statistics.mean(r[1] for r in rows)
            print(f"  {label:40} {rss:8.1f}M {pss:8.1f}M {pss / floor_pss:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-n", type=int, default=30, help="starts timed per row (>= 20)")
    parser.add_argument("--instances", type=int, default=10, help="envds side by side for PSS")
    parser.add_argument("--python", default="/usr/bin/python3", help="the sandbox's interpreter")
    args = parser.parse_args()
    if args.n < 20:
        parser.error("-n must be at least 20")
    with tempfile.TemporaryDirectory(prefix="envd-bench-") as tmp:
        site = Path(tmp) / "site"
        build_site(site, args.python)
        version = subprocess.run([args.python, "-V"], capture_output=True, text=True).stdout
        load = os.getloadavg()[0]
        print(f"{args.python} ({version.strip()}), -S, warm .pyc, n={args.n}, load {load:.1f}\n")
        timings(args.python, site, args.n)
        memory_table(args.python, site, args.instances)


if __name__ == "__main__":
    main()
