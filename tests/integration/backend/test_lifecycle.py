"""Create, reach, inspect and limit sandboxes of the namespace backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from backend_harness import SandboxFactory, new_id

from bac_server.backends.base import (
    ResourceLimitError,
    SandboxNotFound,
    SandboxSetupError,
    SandboxSpec,
    SandboxStatus,
    TemplateImage,
)
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


def _cgroup(controller: str, slot: str, name: str) -> str:
    return Path(f"/sys/fs/cgroup/{controller}/bac/{slot}/{name}").read_text().strip()


def _slot_of(backend: NamespaceBackend, sandbox_id: str) -> str:
    claim = backend.config.claims_dir / sandbox_id
    return claim.read_text()


async def test_envd_answers_through_the_veth(backend: NamespaceBackend,
                                             make_sandbox: SandboxFactory) -> None:
    """A created sandbox's envd answers /health at the address the backend returns."""
    sbx = await make_sandbox()
    assert sbx.address.startswith("10.202.")
    assert await sbx.health() == 204
    assert await backend.status(sbx.id) is SandboxStatus.RUNNING
    assert (await backend.endpoint(sbx.id)).address == sbx.address
    assert sbx.id in await backend.list()


async def test_env_vars_user_and_hostname(make_sandbox: SandboxFactory) -> None:
    """/init delivered the env vars and default user; the hostname is the sandbox id."""
    sbx = await make_sandbox(env_vars={"GREETING": "hello world", "N": "1"})
    result = await sbx.run('echo "$GREETING|$N"; whoami; pwd; hostname')
    assert result.stdout.split("\n")[:4] == ["hello world|1", "user", "/home/user", sbx.id]


async def test_sudo_works_for_the_user(make_sandbox: SandboxFactory) -> None:
    """The base template's passwordless sudo works (setuid inside the user namespace)."""
    sbx = await make_sandbox()
    result = await sbx.run("sudo -n id -u && sudo -n touch /etc/owned-by-root && "
                           "stat -c %U /etc/owned-by-root")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["0", "root"]
    assert result.stderr == ""


async def test_limits_are_applied_to_the_cgroup(backend: NamespaceBackend,
                                                make_sandbox: SandboxFactory) -> None:
    """vCPUs, memory and pids from the spec are the cgroup's quota, limit and pids.max."""
    sbx = await make_sandbox(vcpus=1, memory_mb=256, pids_max=300)
    slot = _slot_of(backend, sbx.id)
    # One vCPU: 10 ms of CPU time per 10 ms period.
    assert _cgroup("cpu", slot, "cpu.cfs_quota_us") == "10000"
    assert _cgroup("cpu", slot, "cpu.cfs_period_us") == "10000"
    assert _cgroup("memory", slot, "memory.limit_in_bytes") == str(256 * 1024 * 1024)
    assert _cgroup("pids", slot, "pids.max") == "300"
    usage = await backend.usage(sbx.id)
    assert usage.cpu_count == 1
    assert usage.mem_total_bytes == 256 * 1024 * 1024
    assert 0 < usage.mem_used_bytes < usage.mem_total_bytes


async def test_default_limits_are_two_vcpus_and_512_mib(backend: NamespaceBackend,
                                                        make_sandbox: SandboxFactory) -> None:
    """Without explicit resources a sandbox gets E2B's defaults."""
    sbx = await make_sandbox()
    slot = _slot_of(backend, sbx.id)
    assert _cgroup("cpu", slot, "cpu.cfs_quota_us") == "20000"
    assert _cgroup("memory", slot, "memory.limit_in_bytes") == str(512 * 1024 * 1024)


@pytest.mark.parametrize(("field", "value", "named"), [
    ("vcpus", 64, "vcpus"), ("vcpus", 0, "vcpus"), ("memory_mb", 1 << 20, "memory_mb"),
    ("memory_mb", 8, "memory_mb"), ("pids_max", 1 << 30, "pids_max"),
])
async def test_requests_over_the_maxima_are_refused(
        backend: NamespaceBackend, template: TemplateImage, field: str, value: int,
        named: str) -> None:
    """A request beyond the configured maxima raises ResourceLimitError naming the limit."""
    spec = SandboxSpec(sandbox_id=new_id(), template=template, **{field: value})  # type: ignore[arg-type]
    with pytest.raises(ResourceLimitError, match=named):
        await backend.create(spec)
    assert spec.sandbox_id not in await backend.list()


async def test_bad_ids_and_duplicates_are_refused(backend: NamespaceBackend,
                                                  make_sandbox: SandboxFactory,
                                                  template: TemplateImage) -> None:
    """Invalid ids, invalid env names and an id already in use fail with a clear error."""
    for bad in ("UPPER", "a/b", "-x", "x" * 70, ""):
        with pytest.raises(SandboxSetupError, match="invalid sandbox id"):
            await backend.create(SandboxSpec(sandbox_id=bad, template=template))
    with pytest.raises(SandboxSetupError, match="environment"):
        await backend.create(SandboxSpec(sandbox_id=new_id(), template=template,
                                         env_vars={"A=B": "x"}))
    sbx = await make_sandbox()
    with pytest.raises(SandboxSetupError, match="already exists"):
        await backend.create(SandboxSpec(sandbox_id=sbx.id, template=template))
    assert await sbx.health() == 204  # the original is untouched


async def test_unknown_ids(backend: NamespaceBackend) -> None:
    """Queries about unknown sandboxes raise SandboxNotFound; destroy is a no-op."""
    with pytest.raises(SandboxNotFound):
        await backend.status("nosuchsandbox")
    with pytest.raises(SandboxNotFound):
        await backend.endpoint("nosuchsandbox")
    with pytest.raises(SandboxNotFound):
        await backend.usage("nosuchsandbox")
    await backend.destroy("nosuchsandbox")
