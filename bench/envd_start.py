"""envd start-up and idle memory, next to the floor of a bare ``python3`` in the same run.

Builds a private copy of envd's code and dependencies (like the sandbox bundle) and
byte-compiles it with the target interpreter, so the numbers include warm ``.pyc`` but
nothing host-specific. Both envd and the floor run as ``python3 -S`` with only that
directory on ``PYTHONPATH``: ``-S`` keeps this host's site-packages ``.pth`` hooks (which
a sandbox image does not have) out of both sides.

Measured per start (n runs): exec → ``ready`` byte on ``--ready-fd``; exec → first
``GET /health`` answered; exec → ``POST /init`` answered (what the host waits for);
exec → first RPC answered (``process.Process/List``, which loads the RPC stack).
Memory: RSS/PSS after ``/init`` (idle, RPC stack not loaded) and after the first RPC,
averaged over ``--instances`` envds running side by side (shared pages split).

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

SRC = Path(__file__).resolve().parent.parent / "src"
GUEST = ("bac_envd", "bac_protocol")
THIRD_PARTY = (
    "connectrpc",
    "protobuf",
    "protobuf_ext",
    "pyqwest",
    "h11",
    "python_multipart",
    "inotify_simple",
    "typing_extensions",
)


def build_site(target: Path, python: str) -> None:
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
    subprocess.run(
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(target),
        ],
        check=True,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def post(path: str, body: bytes, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: envd\r\nContent-Length: {len(body)}\r\n{extra}"
        "Connection: close\r\n\r\n"
    ).encode() + body


def memory(pid: int) -> tuple[float, float]:
    """(RSS, PSS) in MiB from smaps_rollup."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            values[key] = int(rest.split()[0]) / 1024
    return values["Rss"], values["Pss"]


def spawn(python: str, site: Path, argv: list[str]) -> tuple[subprocess.Popen[bytes], int, float]:
    read_fd, write_fd = os.pipe()
    env = {"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [python, "-S", *[a.replace("{fd}", str(write_fd)) for a in argv]],
        pass_fds=(write_fd,),
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    return proc, read_fd, started


def wait_ready(read_fd: int, started: float) -> float:
    with os.fdopen(read_fd, "rb") as pipe:
        line = pipe.readline()
    if line != b"ready\n":
        sys.exit("process died before it was ready")
    return (time.perf_counter() - started) * 1000


def floor_run(
    python: str, site: Path
) -> tuple[float, tuple[float, float], subprocess.Popen[bytes]]:
    code = "import os,sys; os.write({fd}, b'ready\\n'); sys.stdin.read(1)"
    proc, read_fd, started = spawn(python, site, ["-c", code])
    return wait_ready(read_fd, started), memory(proc.pid), proc


def envd_run(python: str, site: Path) -> tuple[dict[str, float], subprocess.Popen[bytes], int]:
    port = free_port()
    argv = ["-m", "bac_envd", "--host", "127.0.0.1", "--port", str(port), "--ready-fd", "{fd}"]
    proc, read_fd, started = spawn(python, site, argv)
    times = {"ready": wait_ready(read_fd, started)}
    assert b" 204 " in http(
        port, b"GET /health HTTP/1.1\r\nHost: envd\r\nConnection: close\r\n\r\n"
    )
    times["health"] = (time.perf_counter() - started) * 1000
    init = json.dumps({"defaultUser": "root", "defaultWorkdir": "/tmp"}).encode()
    assert b" 204 " in http(port, post("/init", init, "Content-Type: application/json\r\n"))
    times["init"] = (time.perf_counter() - started) * 1000
    return times, proc, port


def first_rpc(port: int, started_ms: float) -> float:
    headers = "Content-Type: application/json\r\nConnect-Protocol-Version: 1\r\n"
    began = time.perf_counter()
    assert b" 200 " in http(port, post("/process.Process/List", b"{}", headers))
    return (time.perf_counter() - began) * 1000 + started_ms


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=30, help="starts to time (>= 20)")
    parser.add_argument("--instances", type=int, default=10, help="envds side by side for PSS")
    parser.add_argument("--python", default="/usr/bin/python3", help="interpreter (sandbox's)")
    args = parser.parse_args()
    if args.n < 20:
        parser.error("-n must be at least 20")
    with tempfile.TemporaryDirectory(prefix="envd-bench-") as tmp:
        site = Path(tmp) / "site"
        build_site(site, args.python)
        version = subprocess.run([args.python, "-V"], capture_output=True, text=True).stdout
        print(f"interpreter {args.python} ({version.strip()}), runs n={args.n}, -S, warm .pyc\n")

        floors: list[float] = []
        for _ in range(args.n):
            ms, _, proc = floor_run(args.python, site)
            floors.append(ms)
            stop(proc)
        samples: dict[str, list[float]] = {"ready": [], "health": [], "init": [], "rpc": []}
        for _ in range(args.n):
            times, proc, port = envd_run(args.python, site)
            times["rpc"] = first_rpc(port, times["init"])
            for key, value in times.items():
                samples[key].append(value)
            stop(proc)

        floor_med = statistics.median(floors)
        print(f"{'exec → …':34} {'median':>9} {'p99':>9} {'÷ floor':>8}")
        print(
            f"{'floor: python3 -c ready':34} {floor_med:8.1f}ms {pct(floors, 0.99):8.1f}ms {1:8.2f}"
        )
        labels = {
            "ready": "envd ready byte (socket listens)",
            "health": "first GET /health answered",
            "init": "POST /init answered",
            "rpc": "first RPC answered (lazy load)",
        }
        for key, label in labels.items():
            med = statistics.median(samples[key])
            print(
                f"{label:34} {med:8.1f}ms {pct(samples[key], 0.99):8.1f}ms {med / floor_med:8.2f}"
            )

        report_memory(args.python, site, args.instances)


def report_memory(python: str, site: Path, instances: int) -> None:
    floors = [floor_run(python, site) for _ in range(instances)]
    floor_rss = statistics.mean(m[1][0] for m in floors)
    floor_pss = statistics.mean(m[1][1] for m in floors)
    for _, _, proc in floors:
        stop(proc)
    runs = [envd_run(python, site) for _ in range(instances)]
    idle = [memory(proc.pid) for _, proc, _ in runs]
    for times, _, port in runs:
        first_rpc(port, times["init"])
    loaded = [memory(proc.pid) for _, proc, _ in runs]
    for _, proc, _ in runs:
        stop(proc)
    print(f"\nmemory, mean of {instances} side by side   {'RSS':>9} {'PSS':>9} {'PSS ÷ floor':>12}")
    print(f"{'floor: idle python3':38} {floor_rss:8.1f}M {floor_pss:8.1f}M {1:12.2f}")
    for label, rows in (("envd idle after /init", idle), ("envd after first RPC", loaded)):
        rss = statistics.mean(r[0] for r in rows)
        pss = statistics.mean(r[1] for r in rows)
        print(f"{label:38} {rss:8.1f}M {pss:8.1f}M {pss / floor_pss:12.2f}")


if __name__ == "__main__":
    main()
