"""LXCFS's files across CRIU: a sandbox with them pauses and wakes seeing its limits, and a
checkpoint taken without them (an older start snapshot) still starts copies."""

from __future__ import annotations

import dataclasses

import pytest
from backend_harness import SandboxFactory, new_id
from runc_fixtures import runc_fixtures

from bac_server.backends.base import SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import lxcfs_files, remove_tree

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

_MIB = 1024 * 1024
_FREE = "free -b | awk '/^Mem:/ {print $2}'"

# Holds /proc/meminfo open across the pause; reads it again (from the start) when asked.
_HOLDER = """
import os, time
f = open("/proc/meminfo")
f.read()
open("/tmp/held", "w").close()
while not os.path.exists("/tmp/reread"):
    time.sleep(0.02)
f.seek(0)
total = f.readline().split()[1]
open("/tmp/reread-new", "w").write(total)
os.rename("/tmp/reread-new", "/tmp/reread-done")
"""

runc_pair, runc, make = runc_fixtures("lxcfs")


@pytest.fixture(autouse=True)
def _lxcfs_serves() -> None:
    if not lxcfs_files():
        pytest.skip("LXCFS is not serving here (apt-get install lxcfs; prepare_host)")


async def test_lxcfs_files_survive_a_pause_to_disk(runc: NamespaceBackend,
                                                   make: SandboxFactory) -> None:
    """CRIU saves and restores a sandbox with LXCFS bound over /proc (external binds), and
    a process holding /proc/meminfo open keeps reading its own limit after the wake."""
    sbx = await make(memory_mb=256)
    await sbx.sdk.files.write("/tmp/hold.py", _HOLDER)
    await sbx.sdk.commands.run("python3 /tmp/hold.py", background=True)
    await sbx.run("until [ -e /tmp/held ]; do sleep 0.02; done")
    await runc.suspend(sbx.id, memory=True)
    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template, memory_mb=256))
    again = await make.attach(sbx.spec, await runc.endpoint(sbx.id))
    assert int((await again.run(_FREE)).stdout) == 256 * _MIB
    await again.run("touch /tmp/reread; until [ -e /tmp/reread-done ]; do sleep 0.02; done")
    assert (await again.run("cat /tmp/reread-done")).stdout.strip() == str(256 * 1024)


async def test_a_checkpoint_without_lxcfs_still_starts_copies(
        runc: NamespaceBackend, template: TemplateImage) -> None:
    """A checkpoint of a sandbox started without LXCFS (as older start snapshots were)
    restores under a server that binds it: the copy runs, with the host's /proc as saved."""
    config = dataclasses.replace(runc.config, lxcfs_dir=None,
                                 data_dir=runc.config.data_dir.with_name(new_id("lx")))
    before = NamespaceBackend(config)
    spec = SandboxSpec(sandbox_id=new_id(), template=template, memory_mb=256)
    try:
        await before.create(spec)
        info = await before.checkpoint(spec.sandbox_id, new_id("c"), memory=True)
        await before.destroy(spec.sandbox_id)
        await before.close()
        after = NamespaceBackend(dataclasses.replace(config, lxcfs_dir=runc.config.lxcfs_dir))
        factory = SandboxFactory(after, template)
        try:
            copy_spec = SandboxSpec(sandbox_id=new_id("f"), template=template, memory_mb=256)
            factory.created.append(copy_spec.sandbox_id)
            copy = await factory.attach(copy_spec, await after.create_from(
                copy_spec, info.checkpoint_id, source_token=None))
            assert int((await copy.run(_FREE)).stdout) > 1024 * _MIB
            fresh = await factory(memory_mb=256)
            assert int((await fresh.run(_FREE)).stdout) == 256 * _MIB
        finally:
            await factory.cleanup()
            await after.close()
    finally:
        await before.close()
        remove_tree(config.data_dir)
