"""Start-up contract: ready pipe, the bootstrap front, hand-over to the full server, exit."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from envd_harness import Envd, free_port, spawn, stop, wait_all_exit

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def loaded_modules(pid: int) -> str:
    """The memory map of envd: which shared objects (extension modules) it has loaded."""
    return Path(f"/proc/{pid}/maps").read_text()


def raw_request(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_ready_pipe_then_health_and_init_without_loading_the_stack() -> None:
    """ready\\n arrives; /health, /init, /envs are answered before asyncio is loaded."""
    port = free_port()
    proc, line = spawn([], port)
    try:
        assert line == b"ready\n"
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 204
        init = httpx.post(f"http://127.0.0.1:{port}/init", json={"defaultUser": "root"})
        assert init.status_code == 204 and init.headers["x-envd-version"] == "0.6.13"
        # The C extension modules of asyncio and the protobuf stack are not mapped yet.
        envs = httpx.get(f"http://127.0.0.1:{port}/envs")
        assert (envs.status_code, envs.json()) == (200, {})
        maps = loaded_modules(proc.pid)
        assert "_asyncio" not in maps and "protobuf_ext" not in maps
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
        assert "_asyncio" in loaded_modules(proc.pid)
    finally:
        stop(proc)


def test_first_request_needing_the_server_is_handed_over_intact() -> None:
    """A pipelined or non-bootstrap first request is served by the full server, unchanged."""
    port = free_port()
    proc, line = spawn([], port)
    try:
        assert line == b"ready\n"
        body = json.dumps({"envVars": {"K": "v"}}).encode()
        reply = raw_request(
            port,
            b"POST /init HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            b"GET /envs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (len(body), body),
        )
        assert reply.startswith(b"HTTP/1.1 204")
        assert reply.rstrip().endswith(b'{"K":"v"}')
    finally:
        stop(proc)


def test_bad_init_body_is_a_400() -> None:
    """A malformed /init body is refused with a JSON 400, and envd keeps serving."""
    port = free_port()
    proc, _ = spawn([], port)
    try:
        bad = httpx.post(f"http://127.0.0.1:{port}/init", content=b"{not json")
        assert bad.status_code == 400 and bad.json()["code"] == 400
        wrong = httpx.post(f"http://127.0.0.1:{port}/init", json={"envVars": {"A": 1}})
        assert wrong.status_code == 400
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 204
    finally:
        stop(proc)


def test_port_in_use_fails_fast_without_ready() -> None:
    """If the port is taken envd exits 1 with a message and never writes ready."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        proc, line = spawn([], holder.getsockname()[1])
        assert line == b""
        assert proc.wait(timeout=10) == 1
        assert proc.stderr is not None and b"cannot listen" in proc.stderr.read()
        proc.stderr.close()


def test_bad_arguments_exit_with_usage() -> None:
    """An unknown flag or a non-numeric port exits non-zero with the usage line."""
    import subprocess
    import sys

    for argv in (["--nope"], ["--port", "http"]):
        result = subprocess.run([sys.executable, "-m", "bac_envd", *argv], capture_output=True)
        assert result.returncode != 0 and b"usage: python3 -m bac_envd" in result.stderr


def test_sigterm_kills_every_process_envd_started() -> None:
    """On SIGTERM envd exits 0 and takes the trees of all its processes with it."""
    port = free_port()
    proc, _ = spawn(["--preload"], port)
    try:
        httpx.post(f"http://127.0.0.1:{port}/init", json={"defaultUser": "root"})
        from e2b import Sandbox

        sandbox = Sandbox.create(debug=True, sandbox_url=f"http://127.0.0.1:{port}")
        handle = sandbox.commands.run("sleep 300 & echo $!; wait", background=True)
        child = int(next(out for out, _, _ in handle if out).split()[0])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert wait_all_exit({handle.pid, child}, timeout=10) == set()
    finally:
        stop(proc)


def test_keep_alive_requests_are_not_held_back_by_nagle(envd: Envd) -> None:
    """Back-to-back RPCs on one connection take milliseconds, not the ~40 ms a Nagle /
    delayed-ACK stall costs when replies leave as several small writes."""
    import time

    headers = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
    durations = []
    with httpx.Client() as client:
        for _ in range(15):
            began = time.perf_counter()
            response = client.post(
                f"{envd.url}/filesystem.Filesystem/Stat", content=b'{"path":"/"}', headers=headers
            )
            durations.append(time.perf_counter() - began)
            assert response.status_code == 200
    # With the stall every request after the first waits >= 40 ms (the kernel's minimum
    # delayed-ACK time); the fastest of 14 is robust against a loaded machine.
    assert min(durations[1:]) < 0.030, durations


def test_front_envs_and_token_rules_match_the_full_server() -> None:
    """Before the server loads, /envs and /init apply the same token rule and JSON."""
    port = free_port()
    proc, _ = spawn([], port)
    url = f"http://127.0.0.1:{port}"
    try:
        env = {"A": 'quote " and é', "B": ""}
        assert (
            httpx.post(f"{url}/init", json={"accessToken": "t", "envVars": env}).status_code == 204
        )
        denied = httpx.get(f"{url}/envs")
        assert denied.status_code == 401 and denied.json()["code"] == 401
        assert httpx.get(f"{url}/envs", headers={"X-Access-Token": "t"}).json() == env
        assert httpx.post(f"{url}/init", json={"accessToken": "x"}).status_code == 401
        assert "_asyncio" not in loaded_modules(proc.pid)
    finally:
        stop(proc)


# What the sandbox's PID 1 runs before it forks envd (``__main__.main`` then ``Keeper``):
# every module it imports stays in its memory for the sandbox's life, shared with envd
# only until either writes the page.
_KEEPER_PATH = """
import sys
from bac_envd.__main__ import parse
from bac_envd._memory import merge_pages
from bac_envd._trust import install_or_say
from bac_envd._users import remember_users
from bac_envd._state import EnvdState
from bac_envd._keeper import Keeper
from bac_envd._bootstrap import _loads
remember_users()
EnvdState().apply_init(_loads(b'{"accessToken": "t", "envVars": {"A": "1"}}'), forward=False)
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.timeout(30)
def test_the_keeper_imports_nothing_it_does_not_run() -> None:
    """PID 1 resolves users, keeps /init copies and restarts envd on C-level modules:
    none of the pure-Python packages envd's server loads (a dataclass, ``re`` through
    ``base64``, ``collections`` for an annotation cost 2 MiB of every sandbox's memory)."""
    src = Path(__file__).resolve().parents[3] / "src"
    loaded = subprocess.run([sys.executable, "-s", "-S", "-c", _KEEPER_PATH], check=True,
                            capture_output=True, text=True, cwd=src).stdout.split()
    heavy = {"asyncio", "base64", "collections", "dataclasses", "enum", "inspect", "json",
             "re", "typing"}
    assert "bac_envd._keeper" in loaded
    assert heavy.isdisjoint(loaded), sorted(heavy.intersection(loaded))
