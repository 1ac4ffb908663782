"""A suspend makes its wake's cgroups and /dev ahead (``_wake_ahead``); the wake uses
them only when they are exactly what the images ask for. On real runc sandboxes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from backend_harness import Sandbox, SandboxFactory, footprint, leftovers, slot_record
from runc_fixtures import runc_fixtures

from bac_server.backends.base import SandboxSpec
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import mounts_under
from bac_server.host._syscalls import MNT_DETACH, umount

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

runc_pair, runc, make = runc_fixtures("ahead")

_COUNTER = "i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done"


def _slot_root(backend: NamespaceBackend, sandbox_id: str) -> Path:
    return backend.config.sandboxes_dir / slot_record(backend, sandbox_id).slot


def _cgroups(backend: NamespaceBackend, sandbox_id: str) -> dict[str, Path]:
    record = slot_record(backend, sandbox_id)
    return {path.parent.parent.name: path for path in
            (Path("/sys/fs/cgroup") / hierarchy / record.cgroup_path.strip("/")
             for hierarchy in [p.name for p in Path("/sys/fs/cgroup").iterdir()])
            if path.is_dir()}


def _devices(cgroup: Path) -> list[str]:
    return sorted((cgroup / "devices.list").read_text().split("\n"))


async def _counting(sbx: Sandbox) -> int:
    handle = await sbx.sdk.commands.run(_COUNTER, background=True)
    await sbx.run("until [ -s /tmp/count ]; do sleep 0.02; done")
    return handle.pid


async def test_suspend_makes_the_wakes_cgroups_and_dev(runc: NamespaceBackend,
                                                      make: SandboxFactory) -> None:
    """After a suspend the slot's cgroups exist empty (no task, no memory charged) with
    the sandbox's device rules, and its /dev is mounted on the host; the wake restores
    into those very cgroups and the host lets go of /dev."""
    sbx = await make()
    counter = await _counting(sbx)
    before = _devices(_cgroups(runc, sbx.id)["devices"])
    root = _slot_root(runc, sbx.id)

    await runc.suspend(sbx.id, memory=True)
    made = _cgroups(runc, sbx.id)
    assert footprint(runc, sbx.id).processes == ()
    assert int((made["memory"] / "memory.usage_in_bytes").read_text()) == 0
    assert _devices(made["devices"]) == before
    assert mounts_under(root / "devfs")
    inodes = {name: path.stat().st_ino for name, path in made.items()}

    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
    assert counter in {p.pid for p in await sbx.sdk.commands.list()}
    assert {name: path.stat().st_ino for name, path in _cgroups(runc, sbx.id).items()} \
        == inodes
    deadline = asyncio.get_running_loop().time() + 20
    while mounts_under(root / "devfs"):  # detached by a thread of its own
        assert asyncio.get_running_loop().time() < deadline, mounts_under(root / "devfs")
        await asyncio.sleep(0.01)
    assert (await sbx.run("ls /dev/null /dev/pts/ptmx")).exit_code == 0


async def test_a_loosened_cgroup_is_never_restored_into(runc: NamespaceBackend,
                                                        make: SandboxFactory) -> None:
    """Security: a device rule added to the made-ahead cgroup while the sandbox is
    suspended (anything may have happened on the host meanwhile) is not what the wake
    restores into: the rules are made again, exactly the saved ones. A /dev unmounted
    meanwhile is made again too."""
    sbx = await make()
    before = _devices(_cgroups(runc, sbx.id)["devices"])
    assert "a *:* rwm" not in before
    root = _slot_root(runc, sbx.id)
    await runc.suspend(sbx.id, memory=True)
    (_cgroups(runc, sbx.id)["devices"] / "devices.allow").write_text("a *:* rwm")
    umount(str(root / "devfs"), MNT_DETACH)

    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
    assert _devices(_cgroups(runc, sbx.id)["devices"]) == before
    assert (await sbx.run("echo up > /dev/null && ls /dev/pts/ptmx")).exit_code == 0


async def test_files_only_wake_drops_what_was_made_ahead(runc: NamespaceBackend,
                                                         make: SandboxFactory) -> None:
    """A wake without memory starts afresh: the /dev made for a restore is unmounted at
    once and the runtime makes its own cgroups; destroying the sandbox leaves nothing."""
    sbx = await make()
    fp = footprint(runc, sbx.id)
    root = _slot_root(runc, sbx.id)
    await runc.suspend(sbx.id, memory=True)
    assert mounts_under(root / "devfs")
    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template), memory=False)
    assert not mounts_under(root / "devfs")
    assert (await sbx.run("echo fresh")).stdout.strip() == "fresh"
    await runc.suspend(sbx.id, memory=True)
    await runc.destroy(sbx.id)
    assert leftovers(fp) == []
