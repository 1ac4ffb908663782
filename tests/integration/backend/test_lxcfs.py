"""Inside a sandbox, free, nproc, /proc and df show its own limits (LXCFS and its disk),
and a sandbox still starts where LXCFS does not serve."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from backend_harness import Sandbox, SandboxFactory, backend_and_factory

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import lxcfs_files

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

_MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def _lxcfs_serves() -> None:
    if not lxcfs_files():
        pytest.skip("LXCFS is not serving here (apt-get install lxcfs; prepare_host)")


async def _view(sbx: Sandbox) -> dict[str, str]:
    probes = {
        "free": "free -b | awk '/^Mem:/ {print $2}'",
        "nproc": "nproc",
        "cpu_count": "python3 -c 'import os; print(os.cpu_count())'",
        "cpuinfo": "grep -c ^processor /proc/cpuinfo",
        "stat": "grep -c '^cpu[0-9]' /proc/stat",
        "uptime": "cut -d' ' -f1 /proc/uptime",
        "df": "df -B1 --output=size / | tail -1",
    }
    return {name: (await sbx.run(cmd)).stdout.strip() for name, cmd in probes.items()}


async def test_free_nproc_proc_and_df_show_the_sandboxs_limits(
        make_sandbox: SandboxFactory) -> None:
    """A 1-vCPU, 256 MiB, 64 MiB-disk sandbox on a bigger host sees exactly those."""
    sbx = await make_sandbox(vcpus=1, memory_mb=256, disk_mb=64)
    seen = await _view(sbx)
    assert int(seen["free"]) == 256 * _MIB
    assert seen["nproc"] == seen["cpu_count"] == seen["cpuinfo"] == seen["stat"] == "1"
    host_uptime = time.clock_gettime(time.CLOCK_BOOTTIME)
    assert float(seen["uptime"]) < min(60.0, host_uptime)
    assert 48 * _MIB < int(seen["df"]) <= 64 * _MIB
    mounts = (await sbx.run("cat /proc/self/mountinfo")).stdout
    assert " /proc/meminfo " in mounts and "fuse" in mounts
    # Read-only: the sandbox's root cannot write through them.
    wrote = await sbx.run("echo 1 > /proc/meminfo", user="root")
    assert wrote.exit_code != 0


async def test_a_sandbox_starts_without_lxcfs(template: TemplateImage, data_dir: Path
                                              ) -> None:
    """With LXCFS not serving (here: its directory not mounted), sandboxes start and see
    the host's memory: it is cosmetic, never a reason to fail a create."""
    elsewhere = data_dir.with_name(data_dir.name + "-nx")
    async with backend_and_factory(template, data_dir=elsewhere, pool_size=0,
                                   lxcfs_dir=data_dir / "no-lxcfs") as (_, make):
        sbx = await make(memory_mb=256)
        total = int((await sbx.run("free -b | awk '/^Mem:/ {print $2}'")).stdout.strip())
        assert total > 1024 * _MIB
        assert " /proc/meminfo " not in (await sbx.run("cat /proc/self/mountinfo")).stdout


async def test_lxcfs_is_read_by_each_sandbox_for_itself(backend: NamespaceBackend,
                                                        make_sandbox: SandboxFactory) -> None:
    """Two sandboxes of different sizes each see their own memory through the same LXCFS."""
    small, large = await make_sandbox(memory_mb=128), await make_sandbox(memory_mb=512)
    assert int((await _view(small))["free"]) == 128 * _MIB
    assert int((await _view(large))["free"]) == 512 * _MIB
