"""A sandbox at its disk's limit pauses, wakes (after a reboot took its mounts too), rolls
back and is copied with CRIU: its disk comes back full, its files intact."""

from __future__ import annotations

import pytest
from backend_harness import Sandbox, SandboxFactory, footprint, leftovers, new_id
from runc_fixtures import runc_fixtures

from bac_server.backends.base import SandboxSpec
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host._syscalls import umount

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

DISK_MB = 64

runc_pair, runc, make = runc_fixtures("disk")


async def _fill(sbx: Sandbox) -> str:
    """Fill the disk with random bytes to ENOSPC, a process holding the file open; returns
    the file's sha256."""
    dd = await sbx.run("dd if=/dev/urandom of=/home/user/fill bs=1M count=100")
    assert "No space left on device" in dd.stderr
    await sbx.sdk.commands.run("exec 3</home/user/fill; sleep 3600", background=True)
    return (await sbx.run("sha256sum /home/user/fill")).stdout.split()[0]


async def _still_full(sbx: Sandbox, digest: str) -> None:
    assert (await sbx.run("sha256sum /home/user/fill")).stdout.split()[0] == digest
    more = await sbx.run("head -c 4M /dev/zero > /home/user/more")
    assert "No space left on device" in more.stderr
    assert (await sbx.run("pgrep -f 'sleep 3600'")).exit_code == 0


async def test_a_full_sandbox_pauses_and_wakes_after_a_reboot(runc: NamespaceBackend,
                                                              make: SandboxFactory) -> None:
    """Suspended to disk at its limit (its images go beside the disk, not in it), with a
    reboot taking the overlay and the disk's mount away, it wakes with the same files, the
    same process and the disk still full; destroyed, it leaves no loop device."""
    sbx = await make(disk_mb=DISK_MB)
    digest = await _fill(sbx)
    fp = footprint(runc, sbx.id)
    await runc.suspend(sbx.id, memory=True)
    umount(str(fp.slot_dir / "rootfs"))
    umount(str(fp.slot_dir / "layer"))
    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template, disk_mb=DISK_MB))
    again = await make.attach(sbx.spec, await runc.endpoint(sbx.id))
    await _still_full(again, digest)
    assert (await runc.usage(sbx.id)).disk_full
    await runc.destroy(sbx.id)
    assert leftovers(fp) == []


async def test_a_full_sandbox_rolls_back_and_is_copied(runc: NamespaceBackend,
                                                       make: SandboxFactory) -> None:
    """A checkpoint of a full disk rolls back in place (the disk holds one copy of the
    files, not two) and starts a copy of the same size."""
    sbx = await make(disk_mb=DISK_MB)
    digest = await _fill(sbx)
    info = await runc.checkpoint(sbx.id, new_id("c"), memory=True)
    await sbx.run("rm /home/user/fill; echo later > /home/user/later")
    await runc.restore(SandboxSpec(sandbox_id=sbx.id, template=make.template,
                                   disk_mb=DISK_MB), info.checkpoint_id)
    await _still_full(sbx, digest)
    spec = SandboxSpec(sandbox_id=new_id("f"), template=make.template, disk_mb=DISK_MB)
    make.created.append(spec.sandbox_id)
    copy = await make.attach(spec, await runc.create_from(spec, info.checkpoint_id,
                                                          source_token=None))
    await _still_full(copy, digest)
    await runc.delete_checkpoint(info.checkpoint_id)
