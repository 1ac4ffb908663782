"""A real Bac server in a child process, for compatibility and integration tests.

Runs ``bac_server.admin.serve`` (what ``bac serve`` runs) on a free loopback port with a
fresh data directory for the store and the machine's shared, prebuilt templates
(``BAC_TEMPLATES_DIR``, default /var/lib/bac). It can be killed with SIGKILL and started
again on the same data directory, which is how the restart tests run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

START_TIMEOUT = 90.0
TEMPLATES_DIR = os.environ.get("BAC_TEMPLATES_DIR", "/var/lib/bac")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` with its output in ``log`` (then ``wait_ready``)."""
    with log.open("ab") as sink:
        return subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)


def wait_ready(proc: subprocess.Popen[bytes], log: Path, what: str,
               ready: Callable[[], bool]) -> None:
    """Return once ``ready()`` (which may raise ``httpx.TransportError`` while it is not)
    within ``START_TIMEOUT``; else stop the process and raise ``RuntimeError``. The
    caller holds ``proc`` meanwhile (a test may signal a process still starting)."""
    # Nothing announces readiness across the process boundary: poll with a deadline.
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}:\n{log_tail(log)}")
        with contextlib.suppress(httpx.TransportError):
            if ready():
                return
        time.sleep(0.05)
    stop(proc)
    raise RuntimeError(f"{what} not ready in {START_TIMEOUT}s:\n{log_tail(log)}")


def log_tail(log: Path, lines: int = 60) -> str:
    if not log.exists():
        return ""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def kill9(proc: subprocess.Popen[bytes] | None) -> None:
    """Kill the process the hard way: no shutdown code runs."""
    assert proc is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after a minute."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class ServerProcess:
    data_dir: Path
    port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    keys: list[str] = field(default_factory=list)
    # BAC_HOST to pass (None: the server's default); with ``ca`` the server speaks HTTPS
    # with a certificate that CA signed.
    host: str | None = "127.0.0.1"
    ca: Path | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.ca else 'http'}://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "BAC_"))}
        if self.host is not None:
            env["BAC_HOST"] = self.host
        env.update(
            BAC_PORT=str(self.port),
            BAC_DATA_DIR=str(self.data_dir),
            BAC_TEMPLATES_DIR=TEMPLATES_DIR,
            BAC_POOL_SIZE="2",
            # Pools of a fixed size: a test server lives through later tests, and a pool
            # grown to its demand (the product's default) would be refilled behind them,
            # restores taking the CPUs timing tests measure (tests/integration/backend's
            # test_pool tests the growth).
            BAC_POOL_MAX="0",
            # A small stock of network namespaces: its path is taken by the tests' creates,
            # without every test server making the product's 64 at start.
            BAC_NETNS_STOCK="4",
            # And of slots laid out for restores (the product keeps 32 per layout).
            BAC_SLOT_STOCK="2",
            BAC_METRICS_INTERVAL_S="0.5",
            # Servers run side by side: each its own metrics port.
            BAC_METRICS_ADDRESS="127.0.0.1:0",
        )
        env.update(self.extra_env)
        return env

    def start(self) -> None:
        self.spawn()
        self.wait_started()

    def spawn(self) -> None:
        """Start the process without waiting for it (``wait_started``): servers started
        side by side share the wait."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = spawn(
            [sys.executable, "-c", "from bac_server.admin import serve; serve()"],
            self.env, self.log)

    def wait_started(self) -> None:
        assert self.proc is not None
        verify = ssl.create_default_context(cafile=str(self.ca)) if self.ca else True
        wait_ready(self.proc, self.log, "server",
                   lambda: httpx.get(self.url + "/health", timeout=2,
                                     verify=verify).status_code == 200)

    def log_tail(self, lines: int = 60) -> str:
        return log_tail(self.log, lines)

    def kill9(self) -> None:
        """Kill the server the hard way: no shutdown code runs."""
        kill9(self.proc)

    def stop(self) -> None:
        stop(self.proc)

    def create_key(self, team: str) -> str:
        from bac_server.admin import create_key

        key = create_key(team, "tests", data_dir=self.data_dir)
        self.keys.append(key)
        return key

    def kill_all_sandboxes(self) -> None:
        """Kill every sandbox of every team this server handed a key to."""
        with httpx.Client(base_url=self.url, timeout=60) as client:
            for key in self.keys:
                listed = client.get("/v2/sandboxes", headers={"X-API-KEY": key})
                for item in listed.json() if listed.status_code == 200 else []:
                    client.delete(f"/sandboxes/{item['sandboxID']}", headers={"X-API-KEY": key})

    def destroy_all_volumes(self) -> None:
        """Destroy every volume of every team this server handed a key to (after their
        sandboxes: a mounted volume is not destroyed)."""
        with httpx.Client(base_url=self.url, timeout=60) as client:
            for key in self.keys:
                listed = client.get("/volumes", headers={"X-API-KEY": key})
                for item in listed.json() if listed.status_code == 200 else []:
                    client.delete(f"/volumes/{item['volumeID']}", headers={"X-API-KEY": key})

    def slots(self) -> list[str]:
        """Sandbox slot directories the backend still holds for this data dir."""
        root = self.data_dir / "sandboxes"
        return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def fresh_data_dir(label: str) -> Path:
    """A new data directory sandboxes can use.

    Sandboxes run as unprivileged ids in their user namespace, so every directory on the way
    to their rootfs must be traversable by others; pytest's tmp dirs (0700) are not.
    """
    path = Path(tempfile.mkdtemp(prefix=f"bac-{label}-"))
    path.chmod(0o711)
    return path


def remove_data_dir(server: ServerProcess) -> None:
    """Delete the data dir, but only once the backend holds nothing in it (a leftover slot
    could still have its rootfs mounted)."""
    if server.slots():
        raise AssertionError(f"sandboxes leaked in {server.data_dir}: {server.slots()}")
    # A volume the test left behind stays mounted on the host (its loop device with it):
    # unmounted here, or the tree below would be emptied through the mount and kept.
    volumes = server.data_dir / "volumes"
    for entry in sorted(volumes.glob("*/mnt")) if volumes.is_dir() else []:
        if os.path.ismount(entry):
            subprocess.run(["umount", "-l", str(entry)], check=False)
    shutil.rmtree(server.data_dir, ignore_errors=True)


@contextlib.contextmanager
def running(label: str, **extra_env: str) -> Iterator[ServerProcess]:
    """A started server on a fresh data dir; on exit its sandboxes are killed, it is stopped,
    nothing may be left behind, and the data dir is removed."""
    server = ServerProcess(fresh_data_dir(label), extra_env=dict(extra_env))
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.kill_all_sandboxes()
        with contextlib.suppress(Exception):
            server.destroy_all_volumes()
        server.stop()
    remove_data_dir(server)
