"""Destroying sandboxes, and failing to create them, leaves nothing behind on the host."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from backend_harness import (
    SandboxFactory,
    data_dir_leftovers,
    footprint,
    gather_limited,
    leftovers,
    new_id,
)

from bac_server.backends.base import SandboxSetupError, SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


async def test_destroy_removes_everything(backend: NamespaceBackend,
                                          make_sandbox: SandboxFactory) -> None:
    """After destroy no mount, cgroup, veth, process, lease, claim or file of it remains."""
    sbx = await make_sandbox()
    await sbx.run("sleep 1000 >/dev/null 2>&1 &")  # an extra process to be killed
    fp = footprint(backend, sbx.id)
    assert len(fp.processes) >= 2 and fp.cgroups and leftovers(fp)
    await backend.destroy(sbx.id)
    assert leftovers(fp) == []
    assert data_dir_leftovers(backend) == []
    await backend.destroy(sbx.id)  # idempotent
    assert sbx.id not in await backend.list()


@pytest.mark.slow
async def test_hundred_sandboxes_leave_nothing(backend: NamespaceBackend,
                                               template: TemplateImage) -> None:
    """100 sandboxes created and destroyed leave no mount, cgroup, netns, veth or process."""
    ids = [new_id("h") for _ in range(100)]

    async def make(sid: str) -> None:
        await backend.create(SandboxSpec(sandbox_id=sid, template=template, memory_mb=128))

    try:
        await gather_limited([lambda s=s: make(s) for s in ids], limit=10)  # type: ignore[misc]
        assert set(ids) <= set(await backend.list())
        prints = [footprint(backend, sid) for sid in ids]
        assert len({fp.veth_ifindex for fp in prints}) == 100
    finally:
        await gather_limited([lambda s=s: backend.destroy(s) for s in ids],  # type: ignore[misc]
                             limit=10)
    assert [item for fp in prints for item in leftovers(fp)] == []
    assert data_dir_leftovers(backend) == []


def _orphaned_veths(backend: NamespaceBackend) -> list[str]:
    """Sandbox veths without an address lease: leases outlive their veth, so these leaked."""
    return [p.name for p in Path("/sys/class/net").iterdir()
            if p.name.startswith(backend.config.veth_prefix)
            and not (backend.config.leases_dir / p.name[len(backend.config.veth_prefix):]).exists()]


def _broken_template(root: Path) -> TemplateImage:
    """A rootfs that passes every host-side check but whose envd cannot start."""
    rootfs = root / "rootfs"
    (rootfs / "usr/bin").mkdir(parents=True)
    (rootfs / "usr/bin/python3").symlink_to("python3.11")  # dangling: exec fails
    for path in [rootfs, *rootfs.rglob("*")]:
        os.lchown(path, 100_000, 100_000)
    return TemplateImage(template_id="broken", rootfs=rootfs)


async def test_failed_create_is_torn_down(backend: NamespaceBackend) -> None:
    """A create whose envd cannot start raises SandboxSetupError and leaves nothing."""
    root = backend.config.data_dir / "test-broken-template"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(mode=0o700, parents=True)
    try:
        template = _broken_template(root)
        sid = new_id()
        with pytest.raises(SandboxSetupError, match="envd"):
            await backend.create(SandboxSpec(sandbox_id=sid, template=template))
        assert data_dir_leftovers(backend) == []
        assert _orphaned_veths(backend) == []
        assert sid not in await backend.list()
        assert not (backend.config.claims_dir / sid).exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_template_for_another_id_range_is_refused(backend: NamespaceBackend,
                                                        tmp_path: Path) -> None:
    """A rootfs not shifted to the sandbox id range is refused before anything is made."""
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()  # owned by host root: container root would not own its own "/"
    with pytest.raises(SandboxSetupError, match="id range"):
        await backend.create(SandboxSpec(sandbox_id=new_id(), template=TemplateImage(
            template_id="unshifted", rootfs=rootfs)))
    assert data_dir_leftovers(backend) == []
