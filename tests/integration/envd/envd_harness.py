"""Start a real envd subprocess on loopback and talk to it (shared by the envd tests)."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

READY_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Envd:
    proc: subprocess.Popen[bytes]
    port: int
    workdir: Path
    token: str | None = None
    env_vars: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def headers(self) -> dict[str, str]:
        return {"X-Access-Token": self.token} if self.token else {}

    def status(self) -> dict[str, int]:
        """VmRSS / VmHWM of the envd process, in KiB."""
        values = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
        return values


def spawn(argv_extra: list[str], port: int) -> tuple[subprocess.Popen[bytes], bytes]:
    """Start envd with a ready pipe; returns the process and what it wrote on the pipe."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bac_envd",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ready-fd",
            str(write_fd),
            *argv_extra,
        ],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        readable, _, _ = select.select([pipe], [], [], READY_TIMEOUT)
        line = pipe.readline() if readable else b""
    return proc, line


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


@contextmanager
def running_envd(
    workdir: Path,
    *,
    token: str | None = None,
    env_vars: dict[str, str] | None = None,
    preload: bool = True,
) -> Iterator[Envd]:
    """A real envd on a free loopback port, initialised as the host would (user root)."""
    port = free_port()
    proc, line = spawn(["--preload"] if preload else [], port)
    try:
        if line != b"ready\n":
            stop(proc)
            raise RuntimeError("envd did not become ready")
        envd = Envd(proc, port, workdir, token, dict(env_vars or {}))
        body = {"defaultUser": "root", "defaultWorkdir": str(workdir), "envVars": envd.env_vars}
        if token:
            body["accessToken"] = token
        response = httpx.post(f"{envd.url}/init", json=body, timeout=READY_TIMEOUT)
        assert response.status_code == 204, response.text
        yield envd
    finally:
        stop(proc)


def session_members(sid: int) -> set[int]:
    """Live pids in session ``sid`` (every command envd starts leads its own session)."""
    members = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] != b"Z":
            members.add(int(name))
    return members


def wait_all_exit(pids: set[int], timeout: float) -> set[int]:
    """Wait on pidfds until every pid has exited; returns those still alive at the deadline."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    try:
        remaining = set(fds)
        poller = select.poll()
        for fd in remaining:
            poller.register(fd, select.POLLIN)
        import time

        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            for fd, _ in poller.poll(max(0, int((deadline - time.monotonic()) * 1000))):
                remaining.discard(fd)
                poller.unregister(fd)
        return {fds[fd] for fd in remaining}
    finally:
        for fd in fds:
            os.close(fd)
