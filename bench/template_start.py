"""Benchmark: create latency of a sandbox whose template runs a warm Python service, from
the template's start snapshot (pooled or restored on create) versus booted, through a real
server's REST API.

The template (FROM code-interpreter) starts a Python service and has a ready command that
checks it answers; ``--service pandas`` is a small HTTP server that imported numpy and
pandas, ``--service kernel`` is the code-interpreter kernel server (``bac_kernel``) with a
Python kernel that has executed a cell. Four servers share the machine's templates:

* pooled: the defaults (a sandbox is kept restored ahead; each timed create first waits
  until the pool has refilled, so every one is a hand-out);
* restored on create: ``BAC_START_SNAPSHOT_POOL=0`` (in slots laid out ahead, the
  server's ``BAC_SLOT_STOCK``), and the same with ``BAC_SLOT_STOCK=0`` (each restore lays
  its slot out on its path);
* booted: ``BAC_START_SNAPSHOTS=0`` (create returns once the supervisor reports the
  service ready).

Each timed create is measured from the request to:

* ``created``: ``POST /sandboxes`` answered (envd initialised with the sandbox's token);
* ``first command``: a ``/bin/true`` through envd (the gateway, Connect ``Start``) ended;
* ``service answers``: the service answered a request through the gateway (pandas: a
  computed sum; kernel: ``1 + 1`` executed by the kernel).

Next to the floor measured in the same run: a raw ``criu restore -d`` of a host Python
process that imported the same numpy and pandas (no container, no runc, no network).
p50/p99 over ``--n`` creates each (sequential). Run as root on a host with CRIU >= 4.2:

    .venv/bin/python bench/template_start.py [--n 20] [--service pandas|kernel]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from _stats import pct  # bench/, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat"))
from bac_process import ServerProcess, running

CRIU = "/usr/local/sbin/criu"
TARGET_P50_MS = 100.0
_PANDAS_SERVICE = """
import http.server, numpy, pandas
frame = pandas.DataFrame({"x": numpy.arange(1000)})
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = str(int(frame["x"].sum())).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
"""
_EXECUTE = ("curl -sf -X POST http://127.0.0.1:49999/execute -H 'Content-Type: "
            "application/json' -d '{\"code\": \"1 + 1\"}' | grep -q '\"text\": *\"2\"'")


def line(label: str, values: list[float], floor: float | None) -> str:
    p50, p99 = pct(values, 0.5), pct(values, 0.99)
    ratio = f"{p50 / floor:6.1f}x floor" if floor else " " * 12
    return f"  {label:<44} p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  {ratio}  (n={len(values)})"


# -- the template ---------------------------------------------------------------------------

def template(service: str) -> Any:
    from e2b import Template

    base = Template().from_template("code-interpreter")
    if service == "pandas":
        script = base64.b64encode(_PANDAS_SERVICE.encode()).decode()
        return (base.set_user("root")
                .run_cmd(f"mkdir -p /srv && echo {script} | base64 -d > /srv/service.py")
                .set_user("user")
                .set_start_cmd("python3 /srv/service.py", "curl -sf http://127.0.0.1:8080/"))
    return base.set_start_cmd("PYTHONPATH=/opt/bac/guest python3 -m bac_kernel --port 49999",
                              _EXECUTE)


def build(server: ServerProcess, service: str, name: str) -> tuple[float, list[str], str]:
    """Build time, log lines, template id."""
    from e2b import LogEntry, Template

    logs: list[LogEntry] = []
    started = time.perf_counter()
    info = Template.build(template(service), name, api_key=server.keys[0],
                          api_url=server.url, sandbox_url=server.url,
                          on_build_logs=logs.append)
    return time.perf_counter() - started, [e.message for e in logs], info.template_id


# -- one create, timed ------------------------------------------------------------------------

def _envelope(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return struct.pack(">BI", 0, len(body)) + body


def first_command(client: httpx.Client, sandbox_id: str, token: str) -> None:
    """``/bin/true`` through envd's Connect ``Start``; returns once it ended with 0."""
    response = client.post(
        "/process.Process/Start", content=_envelope({"process": {"cmd": "/bin/true"}}),
        headers={"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": "49983",
                 "X-Access-Token": token, "Content-Type": "application/connect+json",
                 "Connect-Protocol-Version": "1"})
    body, ended = response.content, False
    while body:
        _flags, length = struct.unpack(">BI", body[:5])
        message = json.loads(body[5:5 + length] or b"{}")
        body = body[5 + length:]
        end = (message.get("event") or {}).get("end")
        if end is not None:
            ended = end.get("exitCode", 0) == 0
    if response.status_code != 200 or not ended:
        raise RuntimeError(f"first command failed: {response.status_code} {response.content!r}")


def service_answers(client: httpx.Client, sandbox_id: str, service: str) -> None:
    if service == "pandas":
        response = client.get("/", headers={"E2b-Sandbox-Id": sandbox_id,
                                            "E2b-Sandbox-Port": "8080"})
        ok = response.text == "499500"
    else:
        response = client.post("/execute", json={"code": "1 + 1"},
                               headers={"E2b-Sandbox-Id": sandbox_id,
                                        "E2b-Sandbox-Port": "49999"})
        ok = '"text": "2"' in response.text or '"text":"2"' in response.text
    if response.status_code != 200 or not ok:
        raise RuntimeError(f"service did not answer: {response.status_code} {response.text!r}")


def pooled_ready(server: ServerProcess, template_id: str) -> bool:
    """Whether the backend holds a slot of the template ready that no create took yet."""
    for state in (server.data_dir / "sandboxes").glob("*/state.json"):
        record = json.loads(state.read_text())
        if record.get("template_id") == template_id and record.get("phase") == "pooled":
            return True
    return False


def wait_pooled(server: ServerProcess, template_id: str) -> bool:
    """False when nothing was restored ahead within 30 s (a refill that failed waits for
    the next create); the server's warnings say why."""
    # The pool refills in the background and announces nothing: poll with a deadline.
    deadline = time.monotonic() + 30
    while not pooled_ready(server, template_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def measure(server: ServerProcess, name: str, service: str, n: int, failures: list[str], *,
            template_id: str | None = None) -> tuple[list[float], list[float], list[float]]:
    """``template_id``: wait until a sandbox is restored ahead before each create. A
    service that answers wrongly, or a pool that did not refill, is counted in
    ``failures`` (a wrong answer is not timed)."""
    created, commanded, answered = [], [], []
    with httpx.Client(base_url=server.url, timeout=120) as client:
        key = {"X-API-KEY": server.keys[0]}
        for index in range(n + 1):
            if template_id is not None and index and \
                    not wait_pooled(server, template_id):
                warnings = [t for t in server.log_tail(200).splitlines() if "WARNING" in t]
                failures.append(f"pool empty (create restores): {warnings[-1:]}")
            started = time.perf_counter()
            made = client.post("/sandboxes", json={"templateID": name, "timeout": 120},
                               headers=key)
            t_created = time.perf_counter()
            if made.status_code != 201:
                raise RuntimeError(f"create failed: {made.status_code} {made.text}")
            sandbox_id, token = made.json()["sandboxID"], made.json()["envdAccessToken"]
            t_answer = None
            try:
                first_command(client, sandbox_id, token)
                t_command = time.perf_counter()
                try:
                    service_answers(client, sandbox_id, service)
                    t_answer = time.perf_counter()
                except RuntimeError as exc:
                    failures.append(str(exc)[:200])
            finally:
                client.delete(f"/sandboxes/{sandbox_id}", headers=key)
            if index:  # the first warms the server's and the kernel's caches
                created.append((t_created - started) * 1000)
                commanded.append((t_command - started) * 1000)
                if t_answer is not None:
                    answered.append((t_answer - started) * 1000)
    return created, commanded, answered


# -- floor: CRIU alone on a host process holding the same libraries ---------------------------

def raw_criu_restore(n: int) -> list[float]:
    work = Path(tempfile.mkdtemp(prefix="bac-start-floor-"))
    ready = work / "ready"
    code = (f"import numpy, pandas, time\nopen({str(ready)!r}, 'w').close()\n"
            "while True: time.sleep(1)\n")
    times = []
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    pid = proc.pid
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():  # the process signals nothing else
            if time.monotonic() > deadline:
                raise RuntimeError("the floor process did not start")
            time.sleep(0.01)
        images = work / "images"
        images.mkdir()
        subprocess.run([CRIU, "dump", "-t", str(pid), "-D", str(images), "--shell-job",
                        "-o", "dump.log"], check=True, capture_output=True)
        proc.wait()
        for _ in range(n + 1):
            started = time.perf_counter()
            subprocess.run([CRIU, "restore", "-D", str(images), "--shell-job", "-d",
                            "-o", "restore.log"], check=True, capture_output=True)
            times.append((time.perf_counter() - started) * 1000)
            _kill_restored(pid)
    finally:
        _kill_restored(pid)
        shutil.rmtree(work, ignore_errors=True)
    return times[1:]


def _kill_restored(pid: int) -> None:
    """The restored process is not our child: kill it and wait for its pid to be free
    (nothing signals that to a non-parent, so poll with a deadline)."""
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.002)


# -- main --------------------------------------------------------------------------------------

CONFIGS: tuple[tuple[str, dict[str, str]], ...] = (
    ("pooled (restored ahead)", {}),
    # The product's stock (the tests' servers keep 2).
    ("restored on create", {"BAC_START_SNAPSHOT_POOL": "0", "BAC_SLOT_STOCK": "32"}),
    ("restored on create, no slot laid out ahead",
     {"BAC_START_SNAPSHOT_POOL": "0", "BAC_SLOT_STOCK": "0"}),
    ("booted", {"BAC_START_SNAPSHOTS": "0"}),
)


def run(service: str, n: int, say: Callable[[str], None]) -> None:
    name = f"bench-start-{service}-{uuid.uuid4().hex[:6]}"
    results: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for label, env in CONFIGS:
        with running("bench-start", BAC_POOL_SIZE="0", **env) as server:
            server.create_key("bench")
            took, logs, template_id = build(server, service, name)
            snapshot = "; ".join(m for m in logs if "start snapshot" in m)
            say(f"  [{label}] build {took:.1f} s: {snapshot}")
            if not env:
                again, logs, _ = build(server, service, name)
                say(f"  [{label}] unchanged rebuild {again:.2f} s: "
                    f"{'; '.join(m for m in logs if 'start snapshot' in m)}")
            pooled = template_id if label.startswith("pooled") else None
            failed: list[str] = []
            results[label] = measure(server, name, service, n, failed, template_id=pooled)
            if failed:
                say(f"  [{label}] {len(failed)} of {n + 1} creates went wrong: "
                    + " | ".join(sorted(set(failed))[:3]))
    floor = raw_criu_restore(n)
    f50 = pct(floor, 0.5)
    say(f"\ncreate of a sandbox whose template runs the {service} service, from the "
        "request to each point")
    say(line("floor: raw criu restore -d of python+pandas", floor, None))
    for label, (created, commanded, answered) in results.items():
        say(line(f"{label}: created", created, f50))
        say(line(f"{label}: first command", commanded, f50))
        if answered:
            say(line(f"{label}: service answers", answered, f50))
    say("\n  pooled: each create waited for the pool to refill first (one restore); "
        "creates faster than a restore each find the pool empty and restore on create")
    for label in ("pooled (restored ahead)", "restored on create"):
        p50 = pct(results[label][1], 0.5)
        say(f"  target: first command p50 <= {TARGET_P50_MS:.0f} ms, {label}: "
            f"{'met' if p50 <= TARGET_P50_MS else 'MISSED'} ({p50:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--service", choices=("pandas", "kernel"), default="pandas")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: sandboxes need namespaces, cgroups and mounts")
    print(f"host: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    run(args.service, args.n, print)


if __name__ == "__main__":
    main()
