"""Start the real kernel server (and, where needed, a real envd) as subprocesses on loopback.

Readiness comes through the `--ready-fd` pipe both daemons write to, never by polling.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

READY_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Daemon:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    cwd: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _spawn(module: str, args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], bytes]:
    read_end, write_end = os.pipe()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args, "--ready-fd", str(write_end)],
            pass_fds=(write_end,),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    os.close(write_end)
    try:
        readable, _, _ = select.select([read_end], [], [], READY_TIMEOUT)
        line = os.read(read_end, 64) if readable else b""
    finally:
        os.close(read_end)
    return proc, line


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def running_kernel_server(
    cwd: Path,
    log: Path,
    *,
    envd_url: str = "",
    prestart: str = "python",
    ack_timeout: float | None = None,
) -> Iterator[Daemon]:
    """The kernel server on a free port, contexts defaulting to `cwd`."""
    port = free_port()
    args = ["--host", "127.0.0.1", "--port", str(port), "--cwd", str(cwd)]
    args += ["--envd-url", envd_url, "--prestart", prestart]
    if ack_timeout is not None:
        args += ["--ack-timeout", str(ack_timeout)]
    proc, line = _spawn("bac_kernel", args, log)
    try:
        if line != b"ready\n":
            raise RuntimeError(f"kernel server did not become ready; log: {log.read_text()}")
        yield Daemon(proc, port, log, cwd)
    finally:
        _stop(proc)


@contextlib.contextmanager
def running_envd(
    log: Path, workdir: Path, env_vars: dict[str, str], token: str | None = None
) -> Iterator[Daemon]:
    """A real envd, initialised with sandbox-wide env vars (and a token) as the host does."""
    port = free_port()
    proc, line = _spawn("bac_envd", ["--host", "127.0.0.1", "--port", str(port)], log)
    try:
        if line != b"ready\n":
            raise RuntimeError(f"envd did not become ready; log: {log.read_text()}")
        daemon = Daemon(proc, port, log, workdir)
        body: dict[str, object] = {
            "defaultUser": "root",
            "defaultWorkdir": str(workdir),
            "envVars": env_vars,
        }
        if token:
            body["accessToken"] = token
        response = httpx.post(f"{daemon.url}/init", json=body, timeout=READY_TIMEOUT)
        assert response.status_code == 204, response.text
        yield daemon
    finally:
        _stop(proc)


def process_group_members(pgid: int) -> set[int]:
    """Pids whose process group is `pgid` (a kernel leads its own group)."""
    members = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.add(int(entry.name))
    return members


def is_running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a dead child its parent has not reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
