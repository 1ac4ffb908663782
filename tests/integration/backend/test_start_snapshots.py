"""Start snapshots in the backend: taken (booted, ready, checkpointed), and sandboxes made
from one: handed out restored ahead, restored, or booted when the snapshot is broken
(real runc, real CRIU restores)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from backend_harness import new_id
from runc_fixtures import runc_fixtures

from bac_server.backends.base import (
    SandboxEndpoint,
    SandboxSpec,
    ServiceNotReady,
    StartSnapshotRef,
    StartSnapshotter,
    TemplateImage,
)
from bac_server.backends.egress import EgressPolicy
from bac_server.backends.namespaces import NamespaceBackend, testing

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

runc_pair, runc, make = runc_fixtures("snapshots", start_snapshot_pool_size=1)

# Succeeds at its third run: proves the ready check retries, and leaves a file that only a
# sandbox continuing from the snapshot has (three lines: one per run).
READY = "echo run >> /home/user/ready-runs; [ $(wc -l < /home/user/ready-runs) -ge 3 ]"
SNAPSHOT_TOKEN = "snapshot-token-0123456789abcdef"


async def _take(backend: NamespaceBackend, template: TemplateImage,
                ready_cmd: str | None = READY, bound_s: float = 20) -> TemplateImage:
    """``template`` with a start snapshot freshly taken of it."""
    checkpoint_id = new_id("c")
    await backend.take_start_snapshot(template, checkpoint_id, token=SNAPSHOT_TOKEN,
                                      vcpus=1, memory_mb=256, ready_cmd=ready_cmd,
                                      ready_bound_s=bound_s)
    return dataclasses.replace(template, start_snapshot=StartSnapshotRef(checkpoint_id,
                                                                         SNAPSHOT_TOKEN))


def _spec(image: TemplateImage, **overrides: object) -> SandboxSpec:
    sid = new_id("s")
    spec = SandboxSpec(sandbox_id=sid, template=image, vcpus=1, memory_mb=256,
                       envd_access_token="tok-" + sid)
    return dataclasses.replace(spec, **overrides)  # type: ignore[arg-type]


def _state(backend: NamespaceBackend, slot: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(
        (backend.config.sandboxes_dir / slot / "state.json").read_text())
    return loaded


def _pooled_slots(backend: NamespaceBackend) -> set[str]:
    root = backend.config.sandboxes_dir
    return {d.name for d in root.iterdir() if (d / "state.json").is_file()
            and _state(backend, d.name)["phase"] == "pooled"}


def _slot_of(backend: NamespaceBackend, sandbox_id: str) -> str:
    return (backend.config.claims_dir / sandbox_id).read_text().strip()


def _envelope(message: dict[str, object]) -> bytes:
    payload = json.dumps(message).encode()
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


async def _run(endpoint: SandboxEndpoint, token: str, cmd: str) -> tuple[int, str]:
    """A shell command through envd's Connect API: the HTTP status and its stdout."""
    start: dict[str, object] = {"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}}
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        response = await client.post(
            f"http://{endpoint.address}:{endpoint.envd_port}/process.Process/Start",
            headers={"X-Access-Token": token, "Content-Type": "application/connect+json"},
            content=_envelope(start))
    body, out = response.content, b""
    while response.status_code == 200 and body:
        size = int.from_bytes(body[1:5], "big")
        frame, body = json.loads(body[5:5 + size]), body[5 + size:]
        data = frame.get("event", {}).get("data", {})
        out += base64.b64decode(data.get("stdout", ""))
    return response.status_code, out.decode()


RELAY_CRT = "/usr/local/share/ca-certificates/bac/relay-0.crt"


def _subject(pem: str) -> str:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem.encode()).subject.rfc4514_string()


def _cgroup(slot: str, controller: str, name: str) -> str:
    return Path(f"/sys/fs/cgroup/{controller}/bac/{slot}/{name}").read_text().strip()


def _policy(backend: NamespaceBackend, slot: str) -> object:
    return json.loads((backend.config.sandboxes_dir / slot / "network.json").read_text())


async def test_taking_waits_for_the_ready_command_and_leaves_only_the_checkpoint(
        runc: NamespaceBackend, template: TemplateImage) -> None:
    """The ready command is retried until it succeeds; the checkpoint holds memory and the
    sandbox it was taken from is gone."""
    assert isinstance(runc, StartSnapshotter) and runc.takes_start_snapshots
    before = set(await runc.list())
    image = await _take(runc, template)
    assert image.start_snapshot is not None
    meta = json.loads((runc.config.checkpoints_dir / image.start_snapshot.checkpoint_id
                       / "meta.json").read_text())
    assert meta["memory"] and meta["size_bytes"] > 0
    assert set(await runc.list()) == before
    await runc.delete_start_snapshot(image.start_snapshot.checkpoint_id)


async def test_a_ready_command_that_never_succeeds_takes_nothing(
        runc: NamespaceBackend, template: TemplateImage) -> None:
    """ServiceNotReady names the bound; no checkpoint and no sandbox are left."""
    before = set(await runc.list())
    checkpoint_id = new_id("c")
    with pytest.raises(ServiceNotReady, match="did not succeed within 2 s"):
        await runc.take_start_snapshot(template, checkpoint_id, token=SNAPSHOT_TOKEN, vcpus=1,
                                       memory_mb=256, ready_cmd="false", ready_bound_s=2)
    assert not (runc.config.checkpoints_dir / checkpoint_id).exists()
    assert set(await runc.list()) == before


async def test_a_sandbox_restored_ahead_is_handed_out_as_the_create_asks(
        runc: NamespaceBackend, template: TemplateImage) -> None:
    """After a first create from the snapshot, one sandbox is kept restored ahead under the
    default egress policy; the next create of that shape gets it, with its own id as
    hostname, its own token (the snapshot's is refused), env vars, limits and egress
    policy, still continuing the snapshot; the pool refills. Its relay CA went into its
    trust store while it waited, so the hand-out sends none: the one it trusts is the one
    its relay signs with, and no other sandbox's."""
    image = await _take(runc, template)
    assert image.start_snapshot is not None
    first = _spec(image)
    await runc.create(first)
    try:
        await testing.wait_pool_full(runc, image)
        [ahead] = _pooled_slots(runc)
        assert _policy(runc, ahead) == EgressPolicy().to_wire()
        waiting = runc.config.sandboxes_dir / ahead / "layer" / "upper" / RELAY_CRT.lstrip("/")
        trusted_ahead = waiting.read_text()
        assert f"CA {ahead}" in _subject(trusted_ahead)
        spec = _spec(image, env_vars={"FROM_POOL": "yes"})
        endpoint = await runc.create(spec)
        try:
            slot = _slot_of(runc, spec.sandbox_id)
            assert slot == ahead, "the create should have been handed the restored slot"
            assert spec.envd_access_token is not None
            status, out = await _run(endpoint, spec.envd_access_token,
                                     "hostname; cat /etc/hostname; echo $FROM_POOL; "
                                     "wc -l < /home/user/ready-runs")
            assert status == 200 and out.split() == [spec.sandbox_id, spec.sandbox_id,
                                                     "yes", "3"]
            refused, _ = await _run(endpoint, SNAPSHOT_TOKEN, "true")
            assert refused == 401
            status, trusted = await _run(endpoint, spec.envd_access_token,
                                         f"cat {RELAY_CRT}; cat /etc/ssl/certs/*.crt")
            assert status == 200 and trusted.startswith(trusted_ahead)
            assert trusted_ahead == testing.relay_ca_pem(runc, spec.sandbox_id)
            assert trusted.count(trusted_ahead) == 2  # its own file and the bundle
            assert testing.relay_ca_pem(runc, first.sandbox_id) not in trusted
            assert _cgroup(slot, "cpu", "cpu.cfs_quota_us") == "10000"
            assert _cgroup(slot, "memory", "memory.limit_in_bytes") == str(256 << 20)
            # 256 MiB: 256 + 4 per MiB pids (below the spec's pids_max).
            assert _cgroup(slot, "pids", "pids.max") == str(256 + 4 * 256)
            assert _policy(runc, slot) == EgressPolicy().to_wire()
            await testing.wait_pool_full(runc, image)
            assert len(_pooled_slots(runc)) == 1 and ahead not in _pooled_slots(runc)
        finally:
            await runc.destroy(spec.sandbox_id)
    finally:
        await runc.destroy(first.sandbox_id)
        await runc.delete_start_snapshot(image.start_snapshot.checkpoint_id)
    assert _pooled_slots(runc) == set()  # deleting the snapshot destroyed its pool
    assert not (runc.config.checkpoints_dir / image.start_snapshot.checkpoint_id).exists()


async def test_a_create_with_its_own_egress_policy_restores_instead(
        runc: NamespaceBackend, template: TemplateImage) -> None:
    """A sandbox restored ahead is never handed to a create with its own policy: that one
    is restored under its policy, and the pooled one stays."""
    image = await _take(runc, template)
    assert image.start_snapshot is not None
    first = _spec(image)
    await runc.create(first)
    own = EgressPolicy(internet=False)
    spec = _spec(image, network=own)
    try:
        await testing.wait_pool_full(runc, image)
        [ahead] = _pooled_slots(runc)
        endpoint = await runc.create(spec)
        slot = _slot_of(runc, spec.sandbox_id)
        assert slot != ahead and _pooled_slots(runc) == {ahead}
        assert _policy(runc, slot) == own.to_wire()
        assert spec.envd_access_token is not None
        _, out = await _run(endpoint, spec.envd_access_token, "wc -l < /home/user/ready-runs")
        assert out.strip() == "3"  # restored, not booted
    finally:
        await runc.destroy(spec.sandbox_id)
        await runc.destroy(first.sandbox_id)
        await runc.delete_start_snapshot(image.start_snapshot.checkpoint_id)


async def test_a_broken_snapshot_boots_and_says_it_is_lost(
        runc: NamespaceBackend, template: TemplateImage) -> None:
    """With its images deleted the snapshot cannot be restored: the create boots a working
    sandbox and marks the snapshot lost; a gone checkpoint does the same."""
    image = await _take(runc, template)
    assert image.start_snapshot is not None
    checkpoint = runc.config.checkpoints_dir / image.start_snapshot.checkpoint_id
    shutil.rmtree(checkpoint / "images")
    gone = dataclasses.replace(image, start_snapshot=StartSnapshotRef(new_id("c"), "x"))
    specs = [_spec(image), _spec(gone)]
    try:
        for spec in specs:
            endpoint = await runc.create(spec)
            assert endpoint.start_snapshot_lost
            assert spec.envd_access_token is not None
            status, out = await _run(endpoint, spec.envd_access_token,
                                     "test -e /home/user/ready-runs && echo restored; hostname")
            assert status == 200 and out.split() == [spec.sandbox_id]  # booted
    finally:
        for spec in specs:
            await runc.destroy(spec.sandbox_id)
        await runc.delete_start_snapshot(image.start_snapshot.checkpoint_id)
    assert _pooled_slots(runc) == set()


async def test_restores_on_demand_start_from_one_disk_image_filled_once(
        runc: NamespaceBackend, template: TemplateImage) -> None:
    """Creates restored from the snapshot (no slot made ahead for them) each get a copy of
    one disk image holding the snapshot's files, kept beside it and gone with it: each
    sandbox continues the snapshot on a disk of its own size, and none sees another's
    writes. What a fill stopped by a crash left (a half-written image, its mount) is
    cleared by the next fill."""
    image = await _take(runc, template)
    assert image.start_snapshot is not None
    checkpoint = runc.config.checkpoints_dir / image.start_snapshot.checkpoint_id
    own = EgressPolicy(internet=False)  # never handed a slot restored ahead
    spec_a, spec_b = _spec(image, network=own, disk_mb=96), _spec(image, network=own,
                                                                   disk_mb=96)
    # A crash mid-fill: the half-written image and its mount left behind.
    left = checkpoint / ".disk-96m-v1.img.filling"
    left.write_bytes(b"half")
    (mnt := checkpoint / ".disk-96m-v1.img.mnt").mkdir(mode=0o700)
    await asyncio.to_thread(subprocess.run, ["mount", "-t", "tmpfs", "-o", "size=1m",
                                             "bac-test", str(mnt)], check=True)
    try:
        ends = []
        for spec in (spec_a, spec_b):
            ends.append(await runc.create(spec))
        assert not left.exists() and not mnt.exists()
        assert [p.name for p in checkpoint.glob("disk-*")] == ["disk-96m-v1.img"]
        assert spec_a.envd_access_token is not None and spec_b.envd_access_token is not None
        status, out = await _run(ends[0], spec_a.envd_access_token,
                                 "wc -l < /home/user/ready-runs; echo mine > /home/user/a; "
                                 "df -m --output=size / | tail -1")
        assert status == 200 and out.split()[0] == "3"  # restored, not booted
        assert 80 <= int(out.split()[1]) <= 96
        assert _policy(runc, _slot_of(runc, spec_a.sandbox_id)) == own.to_wire()
        _, out = await _run(ends[1], spec_b.envd_access_token,
                            "wc -l < /home/user/ready-runs; test -e /home/user/a || echo no")
        assert out.split() == ["3", "no"]
    finally:
        for spec in (spec_a, spec_b):
            await runc.destroy(spec.sandbox_id)
        await runc.delete_start_snapshot(image.start_snapshot.checkpoint_id)
    assert not checkpoint.exists()
