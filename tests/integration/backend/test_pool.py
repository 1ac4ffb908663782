"""The warm pool hands out pre-started sandboxes without changing what a sandbox is."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from backend_harness import SandboxFactory, backend_and_factory, data_dir_leftovers, new_id

from bac_server.backends.base import SandboxSpec, SandboxStatus, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend, testing

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session")
async def pooled(template: TemplateImage, data_dir: Path
                 ) -> AsyncIterator[tuple[NamespaceBackend, SandboxFactory]]:
    async with backend_and_factory(template, data_dir=data_dir, pool_size=2) as (backend, f):
        await backend.prepare(template)
        await testing.wait_pool_full(backend, template)
        yield backend, f


def _cgroup(slot: str, controller: str, name: str) -> str:
    return Path(f"/sys/fs/cgroup/{controller}/bac/{slot}/{name}").read_text().strip()


async def test_handout_applies_id_env_limits_and_token(
        pooled: tuple[NamespaceBackend, SandboxFactory], template: TemplateImage) -> None:
    """A pooled sandbox gets the requested hostname, env, limits and access token."""
    backend, _factory = pooled
    pool_slots = set(_pooled_slots(backend))
    assert len(pool_slots) == 2
    sid = new_id("p")
    spec = SandboxSpec(sandbox_id=sid, template=template, vcpus=1, memory_mb=256,
                       pids_max=200, env_vars={"FROM_POOL": "yes"},
                       envd_access_token="tok-" + sid)
    endpoint = await backend.create(spec)
    try:
        slot = (backend.config.claims_dir / sid).read_text()
        assert slot in pool_slots, "the sandbox should have come from the pool"
        assert _cgroup(slot, "cpu", "cpu.cfs_quota_us") == "10000"
        assert _cgroup(slot, "memory", "memory.limit_in_bytes") == str(256 << 20)
        assert _cgroup(slot, "pids", "pids.max") == "200"
        url = f"http://{endpoint.address}:{endpoint.envd_port}"
        start = {"process": {"cmd": "/bin/sh", "args": ["-c", "hostname; cat /etc/hostname; "
                                                          "grep -c " + sid + " /etc/hosts; "
                                                          "echo $FROM_POOL"]}}
        async with httpx.AsyncClient(trust_env=False) as client:
            denied = await client.post(f"{url}/process.Process/List", json={})
            assert denied.status_code == 401  # the token from /init is enforced
            response = await client.post(
                f"{url}/process.Process/Start",
                headers={"X-Access-Token": "tok-" + sid,
                         "Content-Type": "application/connect+json"},
                content=_envelope(start))
        assert [sid, sid, "1", "yes"] == _stdout_lines(response.content)
        assert await backend.status(sid) is SandboxStatus.RUNNING
    finally:
        await backend.destroy(sid)
    await testing.wait_pool_full(backend, template)
    assert len(_pooled_slots(backend)) == 2  # refilled


async def test_close_destroys_pooled_slots(template: TemplateImage, data_dir: Path) -> None:
    """Closing the backend destroys its never-used pooled sandboxes, leaving nothing."""
    async with backend_and_factory(template, data_dir=data_dir, pool_size=2) as (backend, _f):
        await backend.prepare(template)
        await testing.wait_pool_full(backend, template)
        assert len(_pooled_slots(backend)) == 2
    assert _pooled_slots(backend) == []
    assert data_dir_leftovers(backend) == []


async def test_pool_size_zero_starts_cold(backend: NamespaceBackend,
                                          make_sandbox: SandboxFactory,
                                          template: TemplateImage) -> None:
    """With pool size 0, prepare() keeps nothing pre-started and create still works."""
    await backend.prepare(template)
    assert _pooled_slots(backend) == []
    sbx = await make_sandbox()
    assert await sbx.health() == 204


def _pooled_slots(backend: NamespaceBackend) -> list[str]:
    root = backend.config.sandboxes_dir
    if not root.is_dir():
        return []
    return [d.name for d in root.iterdir()
            if (d / "state.json").exists() and '"phase": "pooled"' in
            (d / "state.json").read_text()]


def _envelope(message: dict[str, object]) -> bytes:
    payload = json.dumps(message).encode()
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def _stdout_lines(body: bytes) -> list[str]:
    """Concatenated stdout of a Connect server stream of process events (JSON codec)."""
    out = b""
    while body:
        size = int.from_bytes(body[1:5], "big")
        frame, body = json.loads(body[5:5 + size]), body[5 + size:]
        data = frame.get("event", {}).get("data", {})
        if "stdout" in data:
            out += base64.b64decode(data["stdout"])
    return out.decode().split()


async def test_a_burst_grows_the_pool_to_its_demand_and_the_window_shrinks_it(
        template: TemplateImage, data_dir: Path) -> None:
    """Four creates within the window leave four pooled (the base is one, the most four);
    once the window has passed, the pool is back to one and nothing else is left."""
    async with backend_and_factory(template, data_dir=data_dir, pool_size=1,
                                   pool_max=4) as (backend, _factory):
        await backend.prepare(template)
        await testing.wait_pool_full(backend, template)
        assert len(_pooled_slots(backend)) == 1
        ids = []
        for _ in range(5):  # one more than the most: still four
            spec = SandboxSpec(sandbox_id=new_id("d"), template=template)
            await backend.create(spec)
            ids.append(spec.sandbox_id)
        await testing.wait_pool_full(backend, template)
        assert len(_pooled_slots(backend)) == 4
        for sid in ids:
            await backend.destroy(sid)
        assert await testing.forget_demand(backend) == 3
        assert len(_pooled_slots(backend)) == 1
    assert _pooled_slots(backend) == []
    assert data_dir_leftovers(backend) == []
