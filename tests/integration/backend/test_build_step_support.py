"""Helpers shared by the build step tests (integration and security); holds no tests.

``run_step`` runs one real build step and collects its output; ``BuildWatch`` records,
while a step runs, every host resource its slot holds, so a test can prove afterwards
that none is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from backend_harness import start_time

from bac_server.backends.base import BuildStep
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import nft

SANDBOX_ROOT = 100_000  # host uid of root inside sandboxes (the default id range)


@dataclass
class Output:
    """Lines a step printed, in arrival order, and waiters for a given line."""

    lines: list[tuple[str, str]] = field(default_factory=list)
    _waiters: list[tuple[Callable[[str, str], bool], asyncio.Future[None]]] = \
        field(default_factory=list)

    def __call__(self, stream: str, line: str) -> None:
        self.lines.append((stream, line))
        for predicate, future in self._waiters:
            if not future.done() and predicate(stream, line):
                future.set_result(None)

    def stream(self, name: str) -> list[str]:
        return [line for s, line in self.lines if s == name]

    @property
    def stdout(self) -> list[str]:
        return self.stream("stdout")

    @property
    def stderr(self) -> list[str]:
        return self.stream("stderr")

    def wait_for(self, text: str) -> asyncio.Future[None]:
        """Resolves when a line equal to ``text`` arrives (on either stream)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if any(line == text for _, line in self.lines):
            future.set_result(None)
        else:
            self._waiters.append((lambda _s, line: line == text, future))
        return future


@dataclass
class StepResult:
    code: int
    output: Output
    upper: Path


def layers_dir(backend: NamespaceBackend) -> Path:
    """A fresh directory to put step layers in (inside the test session's data dir)."""
    path = backend.config.data_dir / "step-layers" / secrets.token_hex(4)
    path.mkdir(parents=True, mode=0o700)
    return path


async def run_step(backend: NamespaceBackend, lowers: tuple[Path, ...], script: str, *,
                   upper: Path | None = None, output: Output | None = None,
                   **fields: object) -> StepResult:
    """Run ``/bin/sh -c script`` as a build step on ``lowers``."""
    upper = upper or layers_dir(backend) / "layer"
    output = output or Output()
    step = BuildStep(lowers=lowers, upper=upper, argv=("/bin/sh", "-c", script),
                     **fields)  # type: ignore[arg-type]
    code = await backend.run_build_step(step, output)
    return StepResult(code, output, upper)


def _build_slots(backend: NamespaceBackend) -> list[Path]:
    root = backend.config.sandboxes_dir
    return [p for p in root.iterdir() if p.name.startswith("b")] if root.is_dir() else []


@dataclass(frozen=True)
class BuildWatch:
    """Every host resource of the one build slot running in ``backend``'s data dir."""

    slot_dir: Path
    work_dir: Path
    runtime_state: Path
    cgroups: tuple[Path, ...]
    processes: tuple[tuple[int, int], ...]  # (pid, start time)
    veth: str
    veth_ifindex: int
    lease: Path

    @classmethod
    def take(cls, backend: NamespaceBackend) -> BuildWatch:
        (slot_dir,) = _build_slots(backend)
        record = json.loads((slot_dir / "state.json").read_text())
        slot = slot_dir.name
        cgroups = tuple(p / "bac" / slot for p in Path("/sys/fs/cgroup").iterdir()
                        if (p / "bac" / slot).is_dir())
        pids = {int(x) for c in cgroups for x in (c / "cgroup.procs").read_text().split()}
        processes = tuple((pid, start) for pid in sorted(pids)
                          if (start := start_time(pid)) is not None)
        return cls(slot_dir=slot_dir, work_dir=Path(record["work_dir"]),
                   runtime_state=backend.config.runtime_root / slot, cgroups=cgroups,
                   processes=processes, veth=record["veth"],
                   veth_ifindex=int(Path(f"/sys/class/net/{record['veth']}/ifindex")
                                    .read_text()),
                   lease=backend.config.leases_dir / str(record["lease_index"]))

    def leftovers(self) -> list[str]:
        """What of the slot still exists on the host (empty once it is released)."""
        found: list[str] = []
        if str(self.slot_dir) in Path("/proc/self/mountinfo").read_text():
            found.append(f"mount under {self.slot_dir}")
        found += [f"file {p}" for p in (self.slot_dir, self.work_dir, self.runtime_state)
                  if p.exists()]
        found += [f"cgroup {c}" for c in self.cgroups if c.exists()]
        if self.lease.exists() and str(self.slot_dir) in self.lease.read_text():
            found.append(f"lease {self.lease}")
        link = Path(f"/sys/class/net/{self.veth}/ifindex")
        if link.exists() and int(link.read_text()) == self.veth_ifindex:
            found.append(f"veth {self.veth}")
        found += [f"process {pid}" for pid, start in self.processes
                  if start_time(pid) == start]
        if f'"{self.veth}"' in nft("list set inet bac egress"):
            found.append(f"egress rules of {self.veth}")
        return found


# -- a fake outside target, and a probe run inside a step ------------------------------

_SERVERS = Path(__file__).resolve().parents[1] / "network" / "fake_servers.py"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def fake_target() -> Iterator[str]:
    """A web server (ports 80 and 8080) at a public-looking address, in a network
    namespace of this test session routed from the host; yields its address."""
    n = os.getpid() % 250 + 1
    namespace, host_if = f"bacbs-{os.getpid()}", f"bacbs{os.getpid()}"[:15]
    host_side, peer_side, target = f"10.204.{n}.1", f"10.204.{n}.2", f"203.0.113.{n}"
    server: subprocess.Popen[bytes] | None = None
    try:
        _ip("netns", "add", namespace)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", "uplink", "netns",
            namespace)
        _ip("addr", "add", f"{host_side}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        inside = ["-n", namespace]
        _ip(*inside, "addr", "add", f"{peer_side}/30", "dev", "uplink")
        _ip(*inside, "link", "set", "uplink", "up")
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "addr", "add", f"{target}/32", "dev", "lo")
        _ip(*inside, "route", "add", "default", "via", host_side)
        _ip("route", "replace", f"{target}/32", "via", peer_side)
        server = subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable,
                                   str(_SERVERS), "web", target], stdout=subprocess.PIPE)
        assert server.stdout is not None
        assert server.stdout.readline().strip() == b"ready"
        yield target
    finally:
        if server is not None:
            server.kill()
            server.communicate()  # reaps it and closes its stdout pipe
        subprocess.run(["ip", "route", "del", f"{target}/32"], capture_output=True)
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


_PROBE = """
import json, socket, struct, sys
def gateway():
    for line in open("/proc/net/route").read().splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000":
            return socket.inet_ntoa(struct.pack("<L", int(fields[2], 16)))
out = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((gateway() if host == "gateway" else host, int(port)))
        out[target] = "ok"
    except OSError as exc:
        out[target] = type(exc).__name__
    finally:
        s.close()
print(json.dumps(out))
"""


async def probe(backend: NamespaceBackend, lowers: tuple[Path, ...], *targets: str,
                **fields: object) -> dict[str, str]:
    """``{"host:port": "ok" | <error>}`` as seen from inside a build step ("gateway" is
    the step's default gateway, the host's end of its veth)."""
    output = Output()
    step = BuildStep(lowers=lowers, upper=layers_dir(backend) / "layer",
                     argv=("python3", "-c", _PROBE, *targets), **fields)  # type: ignore[arg-type]
    code = await backend.run_build_step(step, output)
    assert code == 0, output.lines
    found: dict[str, str] = json.loads(output.stdout[-1])
    return found
