"""Starting a real Bac server (``bac serve``) for end-to-end tests, and minting its keys.

The server runs as a child process on a free loopback port with its own data directory,
so tests never touch a server someone else is running. Templates come from the prepared
machine (``BAC_TEMPLATES_DIR``, default ``/var/lib/bac``), built by ``scripts/setup``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

START_TIMEOUT = 60.0
BAC = [sys.executable, "-c", "from bac.cli import main; main()"]


@dataclass(frozen=True)
class BacServer:
    """A running server: where it listens, a key for each of two teams, its environment."""

    url: str
    api_key: str
    other_team_key: str
    env: dict[str, str]
    log: Path

    def opts(self) -> dict[str, str]:
        """Connection options for the SDK."""
        return {"api_url": self.url, "api_key": self.api_key}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    # Nothing announces readiness across the process boundary, so poll with a deadline.
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"bac serve exited with {proc.returncode}:\n{log.read_text()}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/health", timeout=2).status_code < 500:
                return
        time.sleep(0.1)
    raise RuntimeError(f"bac serve did not answer within {START_TIMEOUT}s:\n{log.read_text()}")


def create_key(env: dict[str, str], team: str) -> str:
    """A new API key for ``team``, via ``bac keys create`` against the server's data dir."""
    done = subprocess.run(
        [*BAC, "keys", "create", team, "tests"], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bac keys create failed: {done.stderr or done.stdout}")
    return done.stdout.strip()


@contextlib.contextmanager
def running_server() -> Iterator[BacServer]:
    """Run ``bac serve`` with a fresh data directory until the block ends."""
    # Sandboxes run as unprivileged ids in their user namespace, so every directory on
    # the way to their rootfs must be traversable by others (pytest's tmp dirs are 0700).
    data_dir = Path(tempfile.mkdtemp(prefix="bac-sdk-tests-"))
    data_dir.chmod(0o711)
    port = _free_port()
    env = {
        **os.environ,
        "BAC_HOST": "127.0.0.1",
        "BAC_PORT": str(port),
        "BAC_DATA_DIR": str(data_dir),
        "BAC_TEMPLATES_DIR": os.environ.get("BAC_TEMPLATES_DIR", "/var/lib/bac"),
        # Servers run side by side: each its own metrics port.
        "BAC_METRICS_ADDRESS": "127.0.0.1:0",
        # Pools of a fixed size (tests/compat/bac_process.py says why).
        "BAC_POOL_MAX": os.environ.get("BAC_POOL_MAX", "0"),
    }
    for name in ("BAC_API_KEY", "E2B_API_KEY", "BAC_API_URL", "E2B_API_URL", "E2B_SANDBOX_URL"):
        env.pop(name, None)
    log = data_dir / "server.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as sink:
        proc = subprocess.Popen([*BAC, "serve"], env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_ready(url, proc, log)
        server = BacServer(url, create_key(env, "sdk-tests"), create_key(env, "other-team"),
                           env, log)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
