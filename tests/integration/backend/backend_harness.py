"""Shared by the backend integration and security tests: a real backend, real sandboxes,
and commands run inside them through envd with the official e2b SDK (debug mode)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
from e2b import AsyncSandbox, CommandExitException, CommandResult

from bac_server.backends.base import SandboxEndpoint, SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig
from bac_server.backends.namespaces.slots import SlotRecord
from bac_server.host import default_data_dir, prepare_host
from bac_server.host._loop import loop_backing_files
from bac_server.templates import TemplateStore


def base_template() -> TemplateImage:
    """Prepare the host and build (once) the base template; shared by the whole session."""
    prepare_host()
    return asyncio.run(TemplateStore().ensure_base())


def new_id(prefix: str = "t") -> str:
    return f"{prefix}{secrets.token_hex(5)}"


@dataclass
class Sandbox:
    """A created sandbox plus an SDK connection to its envd."""

    spec: SandboxSpec
    endpoint: SandboxEndpoint
    sdk: AsyncSandbox

    @property
    def id(self) -> str:
        return self.spec.sandbox_id

    @property
    def address(self) -> str:
        return self.endpoint.address

    @property
    def envd_url(self) -> str:
        return f"http://{self.endpoint.address}:{self.endpoint.envd_port}"

    async def run(self, cmd: str, *, user: str = "user", limit_s: float = 60) -> CommandResult:
        """Run a shell command through envd; a non-zero exit is returned, not raised."""
        try:
            return await self.sdk.commands.run(cmd, user=user,  # type: ignore[arg-type]
                                               timeout=limit_s, request_timeout=limit_s + 10)
        except CommandExitException as exc:
            return exc

    async def python(self, code: str, *, user: str = "root", limit_s: float = 60
                     ) -> CommandResult:
        """Run a Python script (written through envd's file API) inside the sandbox."""
        path = f"/tmp/script-{secrets.token_hex(4)}.py"
        await self.sdk.files.write(path, code, user=user)  # type: ignore[arg-type]
        return await self.run(f"python3 {path}", user=user, limit_s=limit_s)

    async def health(self, limit_s: float = 5.0) -> int:
        async with httpx.AsyncClient(trust_env=False) as client:
            response = await client.get(f"{self.envd_url}/health", timeout=limit_s)
            return response.status_code


@dataclass
class SandboxFactory:
    backend: NamespaceBackend
    template: TemplateImage
    created: list[str] = field(default_factory=list)

    async def __call__(self, **overrides: object) -> Sandbox:
        spec = SandboxSpec(sandbox_id=new_id(), template=self.template)
        spec = replace(spec, **overrides)  # type: ignore[arg-type]
        self.created.append(spec.sandbox_id)
        return await self.attach(spec, await self.backend.create(spec))

    async def attach(self, spec: SandboxSpec, endpoint: SandboxEndpoint) -> Sandbox:
        """An SDK connection to a sandbox made some other way (e.g. from a checkpoint)."""
        sdk = await AsyncSandbox.connect(spec.sandbox_id, debug=True,
                                         sandbox_url=f"http://{endpoint.address}:{endpoint.envd_port}")
        return Sandbox(spec, endpoint, sdk)

    async def cleanup(self) -> None:
        await asyncio.gather(*(self.backend.destroy(s) for s in self.created),
                             return_exceptions=True)


@contextlib.asynccontextmanager
async def backend_and_factory(template: TemplateImage, **config: object
                              ) -> AsyncIterator[tuple[NamespaceBackend, SandboxFactory]]:
    backend = NamespaceBackend(NamespaceConfig(**config))  # type: ignore[arg-type]
    factory = SandboxFactory(backend, template)
    try:
        yield backend, factory
    finally:
        await factory.cleanup()
        await backend.close()


# -- host-side observations used to prove that nothing leaks ---------------------------

def private_data_dir() -> Path:
    """A data directory of this test session's own (the template store stays shared)."""
    parent = default_data_dir() / "tests"
    parent.mkdir(mode=0o711, parents=True, exist_ok=True)
    os.chmod(parent, 0o711)
    return parent / f"session-{os.getpid()}"


@dataclass(frozen=True)
class Footprint:
    """Every host resource one sandbox holds, identified so reuse cannot fool the check."""

    sandbox_id: str
    slot_dir: Path
    cgroups: tuple[Path, ...]
    veth: str
    veth_ifindex: int
    processes: tuple[tuple[int, int], ...]  # (pid, start time)
    lease: Path
    runtime_state: Path
    claim: Path


def start_time(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else int(fields[19])


def slot_record(backend: NamespaceBackend, sandbox_id: str) -> SlotRecord:
    """The sandbox's slot record as the backend last saved it (the slot its claim names)."""
    cfg = backend.config
    slot = (cfg.claims_dir / sandbox_id).read_text()
    return SlotRecord.from_json((cfg.sandboxes_dir / slot / "state.json").read_text())


def footprint(backend: NamespaceBackend, sandbox_id: str) -> Footprint:
    cfg = backend.config
    slot = (cfg.claims_dir / sandbox_id).read_text()
    record = json.loads((cfg.sandboxes_dir / slot / "state.json").read_text())
    cgroups = tuple(p / "bac" / slot for p in Path("/sys/fs/cgroup").iterdir()
                    if (p / "bac" / slot).is_dir())
    pids: set[int] = set()
    for cgroup in cgroups:
        pids.update(int(x) for x in (cgroup / "cgroup.procs").read_text().split())
    processes = tuple((pid, start) for pid in sorted(pids)
                      if (start := start_time(pid)) is not None)
    ifindex = int(Path(f"/sys/class/net/{record['veth']}/ifindex").read_text())
    return Footprint(sandbox_id, cfg.sandboxes_dir / slot, cgroups, record["veth"], ifindex,
                     processes, cfg.leases_dir / str(record["lease_index"]),
                     cfg.runtime_root / slot, cfg.claims_dir / sandbox_id)


def leftovers(fp: Footprint) -> list[str]:
    """What of the footprint still exists on the host (empty when fully cleaned up)."""
    found: list[str] = []
    mounts = Path("/proc/self/mountinfo").read_text()
    if str(fp.slot_dir) in mounts:
        found.append(f"mount under {fp.slot_dir}")
    found += [f"file {p}" for p in (fp.slot_dir, fp.runtime_state, fp.claim) if p.exists()]
    if fp.lease.exists() and str(fp.slot_dir) in fp.lease.read_text():
        found.append(f"lease {fp.lease}")
    found += [f"cgroup {c}" for c in fp.cgroups if c.exists()]
    veth = Path(f"/sys/class/net/{fp.veth}/ifindex")
    if veth.exists() and int(veth.read_text()) == fp.veth_ifindex:
        found.append(f"veth {fp.veth}")
    found += [f"process {pid}" for pid, start in fp.processes if start_time(pid) == start]
    found += [f"loop device {device} ({backing})" for device, backing in
              loop_backing_files().items() if backing.startswith(f"{fp.slot_dir}/")]
    return found


def data_dir_leftovers(backend: NamespaceBackend) -> list[str]:
    cfg = backend.config
    found = [f"mount {line.split()[4]}" for line in
             Path("/proc/self/mountinfo").read_text().splitlines()
             if line.split()[4].startswith(str(cfg.data_dir))]
    found += [f"loop device {device} ({backing})" for device, backing in
              loop_backing_files().items() if backing.startswith(f"{cfg.sandboxes_dir}/")]
    for directory in (cfg.sandboxes_dir, cfg.claims_dir):
        if directory.is_dir():
            found += [f"file {p}" for p in directory.iterdir()]
    for lease in cfg.leases_dir.iterdir() if cfg.leases_dir.is_dir() else []:
        with contextlib.suppress(FileNotFoundError):
            if lease.read_text().startswith(str(cfg.data_dir) + "/"):
                found.append(f"lease {lease}")
    return found


async def gather_limited(coros: list[Callable[[], Awaitable[object]]], limit: int) -> list[object]:
    semaphore = asyncio.Semaphore(limit)

    async def one(make: Callable[[], Awaitable[object]]) -> object:
        async with semaphore:
            return await make()

    return await asyncio.gather(*(one(c) for c in coros))
