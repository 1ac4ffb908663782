"""Sandboxes outlive the backend object and are found again; dead ones are detected."""

from __future__ import annotations

import asyncio
import os
import select
import signal
from pathlib import Path

import httpx
import pytest
from backend_harness import SandboxFactory

from bac_server.backends.base import Pausable, SandboxStatus, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


def _freezer_state(backend: NamespaceBackend, sandbox_id: str) -> str:
    slot = (backend.config.claims_dir / sandbox_id).read_text()
    return Path(f"/sys/fs/cgroup/freezer/bac/{slot}/freezer.state").read_text().strip()


async def test_new_backend_reattaches_running_sandboxes(backend: NamespaceBackend,
                                                        make_sandbox: SandboxFactory) -> None:
    """A second backend on the same data dir lists, reaches and destroys the first's sandbox."""
    sbx = await make_sandbox(env_vars={"KEPT": "yes"})
    await backend.close()
    assert await sbx.health() == 204  # closing the backend does not stop sandboxes
    again = NamespaceBackend(NamespaceConfig(data_dir=backend.config.data_dir))
    try:
        assert sbx.id in await again.list()
        assert await again.status(sbx.id) is SandboxStatus.RUNNING
        assert (await again.endpoint(sbx.id)).address == sbx.address
        assert (await sbx.run("echo $KEPT")).stdout.strip() == "yes"
        await again.destroy(sbx.id)
        assert sbx.id not in await again.list()
    finally:
        await again.close()


async def test_dead_sandbox_reports_stopped(backend: NamespaceBackend,
                                            make_sandbox: SandboxFactory) -> None:
    """When a sandbox's processes are killed from outside its status becomes STOPPED."""
    sbx = await make_sandbox()
    slot = (backend.config.claims_dir / sbx.id).read_text()
    pid = int((backend.config.sandboxes_dir / slot / "init.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    pidfd = os.pidfd_open(pid)
    try:  # a pidfd polls readable once its process has exited
        readable, _, _ = await asyncio.to_thread(select.select, [pidfd], [], [], 10)
        assert readable
    finally:
        os.close(pidfd)
    assert await backend.status(sbx.id) is SandboxStatus.STOPPED
    await backend.destroy(sbx.id)
    assert sbx.id not in await backend.list()


async def test_pause_and_resume(backend: NamespaceBackend, make_sandbox: SandboxFactory,
                                template: TemplateImage) -> None:
    """Pause freezes every process (envd stops answering); resume brings it back."""
    assert isinstance(backend, Pausable)
    sbx = await make_sandbox()
    await sbx.run("sleep 1000 >/dev/null 2>&1 &")
    await backend.pause(sbx.id)
    assert await backend.status(sbx.id) is SandboxStatus.PAUSED
    assert _freezer_state(backend, sbx.id) == "FROZEN"
    with pytest.raises(httpx.TimeoutException):
        await sbx.health(limit_s=0.5)
    await backend.pause(sbx.id)  # idempotent
    endpoint = await backend.resume(sbx.id)
    assert endpoint.address == sbx.address
    assert await backend.status(sbx.id) is SandboxStatus.RUNNING
    assert await sbx.health() == 204
    assert (await sbx.run("echo alive")).stdout.strip() == "alive"
