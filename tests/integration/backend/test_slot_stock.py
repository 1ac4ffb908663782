"""Slots laid out ahead for restores (``slots._stock``): once a start snapshot is taken,
slots of its layout are laid out while the backend is quiet (files, seeded disk, root,
pinned network namespace: nothing running); restores take them and are sandboxes of
their own (hostname, limits, files, token), continuing the snapshot; the stock refills;
nothing of it outlives its backend, and a killed server's stock is torn down at the next
start (real runc, real CRIU restores)."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from backend_harness import backend_and_factory, data_dir_leftovers, new_id, private_data_dir
from runc_fixtures import runc_fixtures
from test_start_snapshots import SNAPSHOT_TOKEN, _cgroup, _run, _slot_of, _spec, _take

from bac_server.backends.base import SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import remove_tree

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

STOCK = 2
# No slot restored ahead (the ready pool's): every create from the snapshot restores.
runc_pair, runc, make = runc_fixtures("slot-stock", start_snapshot_pool_size=0,
                                      slot_stock=STOCK)


def _laid_out(backend: NamespaceBackend) -> set[str]:
    """The slots laid out and not handed to any sandbox (phase creating: between creates,
    only the stock's)."""
    found = set()
    for slot in backend.config.sandboxes_dir.iterdir():
        state = slot / "state.json"
        if state.is_file() and json.loads(state.read_text())["phase"] == "creating":
            found.add(slot.name)
    return found


async def _until_stocked(backend: NamespaceBackend, count: int,
                         without: frozenset[str] = frozenset()) -> set[str]:
    """Polls the data dir: nothing announces a refill. A slot counts once its network
    namespace is pinned, the last step of laying it out."""
    for _ in range(600):
        found = {s for s in _laid_out(backend) - without if _mounted(backend, s, "netns")}
        if len(found) == count:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"the stock never held {count}: {_laid_out(backend)}")


def _nothing_runs(backend: NamespaceBackend, slot: str) -> bool:
    """No cgroup and no runtime state: nothing was ever started in the slot."""
    return not [p for p in Path("/sys/fs/cgroup").iterdir() if (p / "bac" / slot).exists()] \
        and not (backend.config.runtime_root / slot).exists()


def _left_of(backend: NamespaceBackend, slots: set[str]) -> list[str]:
    """What is left of the slots: their directories, or mounts under them."""
    sandboxes = backend.config.sandboxes_dir
    mounts = Path("/proc/self/mountinfo").read_text()
    return [f"directory {s}" for s in slots if (sandboxes / s).exists()] + \
        [f"mount under {s}" for s in slots if f"{sandboxes / s}/" in mounts]


def _mounted(backend: NamespaceBackend, slot: str, name: str) -> bool:
    target = str(backend.config.sandboxes_dir / slot / name)
    return any(line.split()[4] == target
               for line in Path("/proc/self/mountinfo").read_text().splitlines())


async def test_restores_take_slots_laid_out_ahead_each_its_own(
        runc: NamespaceBackend, template: TemplateImage) -> None:
    """Slots are laid out as soon as the snapshot is taken (a burst may come before any
    restore), and again after the restores that took them."""
    image = await _take(runc, template)
    assert image.start_snapshot is not None
    specs: list[SandboxSpec] = []
    try:
        ahead = await _until_stocked(runc, STOCK)
        for slot in ahead:
            # Laid out: its disk, its root and its network namespace; nothing runs.
            assert all(_mounted(runc, slot, n) for n in ("layer", "rootfs", "netns")), slot
            assert _nothing_runs(runc, slot)
        one = _spec(image, memory_mb=512, env_vars={"WHICH": "one"})
        two = _spec(image, env_vars={"WHICH": "two"})
        specs += [one, two]
        ends = [await runc.create(one), await runc.create(two)]
        slots = [_slot_of(runc, one.sandbox_id), _slot_of(runc, two.sandbox_id)]
        assert set(slots) == ahead, "the restores should have taken the stocked slots"
        for spec, end in zip((one, two), ends, strict=True):
            assert spec.envd_access_token is not None
            status, out = await _run(end, spec.envd_access_token,
                                     "hostname; cat /etc/hostname; grep -c $(hostname) "
                                     "/etc/hosts; echo $WHICH; wc -l < /home/user/ready-runs")
            # Its own name (the stock's placeholder rewritten), env, and the snapshot
            # continued (restored, not booted).
            assert status == 200 and out.split() == [spec.sandbox_id, spec.sandbox_id, "1",
                                                     spec.env_vars["WHICH"], "3"], out
            refused, _ = await _run(end, SNAPSHOT_TOKEN, "true")
            assert refused == 401
        # The limits each asked for, whatever the stock recorded.
        assert _cgroup(slots[0], "memory", "memory.limit_in_bytes") == str(512 << 20)
        assert _cgroup(slots[1], "memory", "memory.limit_in_bytes") == str(256 << 20)
        # Disks of their own: one's write is not the other's.
        assert one.envd_access_token is not None and two.envd_access_token is not None
        await _run(ends[0], one.envd_access_token, "echo mine > /home/user/mine")
        _, out = await _run(ends[1], two.envd_access_token,
                            "test -e /home/user/mine && echo seen || echo unseen")
        assert out.strip() == "unseen"
        # Refilled once creates pause, with new slots.
        await _until_stocked(runc, STOCK, without=frozenset(ahead))
    finally:
        for spec in specs:
            await runc.destroy(spec.sandbox_id)
        await runc.delete_start_snapshot(image.start_snapshot.checkpoint_id)


async def test_the_stock_goes_with_its_backend(template: TemplateImage) -> None:
    data_dir = private_data_dir().with_name(f"slot-stock-close-{new_id()}")
    try:
        async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                       runtime="runc", start_snapshot_pool_size=0,
                                       slot_stock=STOCK) as (backend, _make):
            image = await _take(backend, template)
            assert image.start_snapshot is not None
            spec = _spec(image)
            await backend.create(spec)
            await _until_stocked(backend, STOCK)
            await backend.destroy(spec.sandbox_id)
            await backend.delete_start_snapshot(image.start_snapshot.checkpoint_id)
        assert data_dir_leftovers(backend) == []
    finally:
        remove_tree(data_dir)


# A server killed with its slot stock full: takes a start snapshot, restores one sandbox
# from it, says so, then waits to be killed.
_KILLED = textwrap.dedent("""
    import asyncio, base64, dataclasses, pickle, sys
    from pathlib import Path
    from bac_server.backends.base import SandboxSpec, StartSnapshotRef
    from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig

    async def main():
        template = pickle.loads(base64.b64decode(sys.argv[2]))
        backend = NamespaceBackend(NamespaceConfig(
            data_dir=Path(sys.argv[1]), pool_size=0, runtime="runc",
            start_snapshot_pool_size=0, slot_stock=2))
        await backend.take_start_snapshot(template, sys.argv[3], token=sys.argv[4],
                                          vcpus=1, memory_mb=256, ready_cmd=None,
                                          ready_bound_s=20)
        image = dataclasses.replace(template,
                                    start_snapshot=StartSnapshotRef(sys.argv[3], sys.argv[4]))
        await backend.create(SandboxSpec(sandbox_id=sys.argv[5], template=image, vcpus=1,
                                         memory_mb=256, envd_access_token="tok-killed"))
        print("created", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


async def test_a_killed_servers_stock_is_torn_down_at_the_next_start(
        template: TemplateImage) -> None:
    data_dir = private_data_dir().with_name(f"slot-stock-killed-{new_id()}")
    checkpoint_id, sandbox_id = new_id("c"), new_id("s")
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _KILLED, str(data_dir),
        base64.b64encode(pickle.dumps(template)).decode(), checkpoint_id,
        SNAPSHOT_TOKEN, sandbox_id, stdout=asyncio.subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert (await child.stdout.readline()).decode().strip() == "created"
        async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                       runtime="runc", start_snapshot_pool_size=0,
                                       slot_stock=0) as (backend, _make):
            stocked = await _until_stocked(backend, 2)
            child.send_signal(signal.SIGKILL)
            await child.wait()
            # The next start: the killed server's sandbox re-attached, its stock torn down
            # (mounts, loop devices, namespaces, leases), as any create it cut short.
            assert sandbox_id in await backend.list()
            assert _left_of(backend, stocked) == []
            await backend.destroy(sandbox_id)
            await backend.delete_start_snapshot(checkpoint_id)
        assert data_dir_leftovers(backend) == []
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        remove_tree(data_dir)

