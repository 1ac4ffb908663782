"""Network namespaces made ahead (``network._netns_stock``): a new sandbox takes one (the
same namespace and veth, its lease passed to the sandbox's slot, its egress objects made
ahead) and has the network a fresh one has; the stock refills once creates pause; nothing
of it outlives its backend, and what a killed server's stock held (namespaces, leases,
egress objects in the host table) is gone or removed at the next start."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from backend_harness import (
    SandboxFactory,
    backend_and_factory,
    data_dir_leftovers,
    footprint,
    leftovers,
    private_data_dir,
    slot_record,
)

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import TABLE_FAMILY, TABLE_NAME, nft, remove_tree

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

STOCK = 3


def _stocked(backend: NamespaceBackend) -> dict[int, str]:
    """Lease index -> veth of the namespaces in this backend's stock, from the host's
    lease files (what each names)."""
    cfg = backend.config
    marker = str(cfg.sandboxes_dir / ".netns-stock") + "\n"
    found: dict[int, str] = {}
    for lease in cfg.leases_dir.iterdir():
        with contextlib.suppress(FileNotFoundError):
            if lease.name.isdigit() and lease.read_text().startswith(marker):
                found[int(lease.name)] = f"{cfg.veth_prefix}{lease.name}"
    return found


def _egress_objects(veth: str) -> bool:
    """Whether the host table holds the veth's own objects (its log chains, reached
    through the map ``log_ok``, made with its counters and logs in one batch)."""
    return f'"{veth}" : jump ok_{veth}' in nft(f"list map {TABLE_FAMILY} {TABLE_NAME} log_ok")


def _in_egress(veth: str) -> bool:
    """Whether the veth's policy is installed (without it, it reaches nothing)."""
    return f'"{veth}"' in nft(f"list set {TABLE_FAMILY} {TABLE_NAME} egress")


def _ifindex(veth: str) -> int | None:
    try:
        return int(Path(f"/sys/class/net/{veth}/ifindex").read_text())
    except FileNotFoundError:
        return None


async def _until_stocked(backend: NamespaceBackend, count: int) -> dict[int, str]:
    """Polls the host's lease files: nothing announces a refill."""
    for _ in range(600):
        found = _stocked(backend)
        if len(found) == count and all(_ifindex(v) is not None for v in found.values()):
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"the stock never held {count}: {_stocked(backend)}")


async def _until(check: Callable[[], bool]) -> bool:
    """Polls: a namespace enters the stock an instant before its egress objects are
    made (nothing announces either)."""
    for _ in range(600):
        if check():
            return True
        await asyncio.sleep(0.05)
    return False


async def _until_gone(veths: list[str]) -> None:
    """A namespace no descriptor holds any more is cleaned up by the kernel's own worker,
    its veth pair with it, an instant later: polled."""
    def present(veth: str) -> bool:
        # While the kernel unregisters it, its sysfs files answer EINVAL: still there.
        return os.path.lexists(f"/sys/class/net/{veth}")

    for _ in range(600):
        if not any(present(v) for v in veths):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"left: {[v for v in veths if present(v)]}")


@pytest_asyncio.fixture(loop_scope="session")
async def stocked(template: TemplateImage
                  ) -> AsyncIterator[tuple[NamespaceBackend, SandboxFactory]]:
    data_dir = private_data_dir().with_name(f"stock-{os.getpid()}")
    try:
        async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                       netns_stock=STOCK) as pair:
            yield pair
    finally:
        remove_tree(data_dir)


async def test_a_sandbox_takes_a_namespace_made_ahead_and_the_stock_refills(
        stocked: tuple[NamespaceBackend, SandboxFactory]) -> None:
    backend, make = stocked
    await backend.list()  # starts the backend, and its stock
    before = await _until_stocked(backend, STOCK)
    ifindexes = {index: _ifindex(veth) for index, veth in before.items()}
    # Each made ahead with its egress objects, and reaching nothing: no policy yet.
    for veth in before.values():
        assert await _until(functools.partial(_egress_objects, veth)), veth
        assert not _in_egress(veth), veth

    sbx = await make()
    record = slot_record(backend, sbx.id)
    # The very namespace made ahead: its address, and its veth (same ifindex: not
    # deleted and made again under the same name).
    assert record.lease_index in before
    assert _ifindex(record.veth) == ifindexes[record.lease_index]
    lease = backend.config.leases_dir / str(record.lease_index)
    assert lease.read_text().startswith(str(backend.config.sandboxes_dir / record.slot) + "\n")
    # The network of a fresh namespace: its address, the sysctls, the way out.
    shown = await sbx.run("ip -4 -o addr show eth0; cat /proc/sys/net/ipv4/"
                          "ip_unprivileged_port_start; ip route show default")
    assert f"inet {record.sandbox_address} peer {record.host_address}/32" in shown.stdout
    assert "\n0\n" in shown.stdout
    assert f"default via {record.host_address}" in shown.stdout
    assert await sbx.health() == 204
    # Its policy installed on the objects made ahead: where it tries to go is logged
    # (a documentation address: nothing answers, the attempt is what counts).
    assert _in_egress(record.veth)
    await sbx.run("timeout 2 bash -c 'echo > /dev/tcp/192.0.2.1/9'")
    usage = await backend.network_usage(sbx.id)
    assert [d for d in usage.destinations if (d.address, d.port) == ("192.0.2.1", 9)], usage

    # Refilled once creates pause: three again, the taken one not among them.
    after = await _until_stocked(backend, STOCK)
    assert record.lease_index not in after

    fp = footprint(backend, sbx.id)
    await backend.destroy(sbx.id)
    assert leftovers(fp) == []


async def test_the_stock_goes_with_its_backend(template: TemplateImage) -> None:
    data_dir = private_data_dir().with_name(f"stock-close-{os.getpid()}")
    try:
        async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                       netns_stock=STOCK) as (backend, _make):
            await backend.list()
            held = await _until_stocked(backend, STOCK)
            for veth in held.values():
                assert await _until(functools.partial(_egress_objects, veth)), veth
        assert _stocked(backend) == {}
        assert not [v for v in held.values() if _egress_objects(v)]
        await _until_gone(list(held.values()))
        assert data_dir_leftovers(backend) == []
    finally:
        remove_tree(data_dir)


# A server killed with its stock full (egress objects made): prints the veths, then waits
# to be killed.
_KILLED = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from bac_server.backends.namespaces.network import AddressPool, Egress, NetnsStock
    from bac_server.backends.namespaces.slots._process import owner_token

    async def main():
        leases, prefix, stock_dir, cidr = Path(sys.argv[1]), *sys.argv[2:5]
        pool = AddressPool(cidr, leases, prefix)
        egress = Egress(pool, (), ("127.0.0.1",))
        await egress.start()
        stock = NetnsStock(
            pool, size=2, stock_dir=stock_dir, owner=owner_token(),
            prepare=lambda l: egress.prepare(l.veth, l.host_address, l.sandbox_address),
            unprepare=lambda l: egress.unprepare(l.veth, l.host_address, l.sandbox_address))
        stock.start()
        while len(stock) < 2:
            await asyncio.sleep(0.01)
        print(" ".join(r.lease.veth for r in stock._ready), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


async def test_a_killed_servers_stock_is_gone_and_what_it_held_removed_at_the_next_start(
        template: TemplateImage) -> None:
    data_dir = private_data_dir().with_name(f"stock-killed-{os.getpid()}")
    try:
        async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                       netns_stock=0) as (backend, _make):
            cfg = backend.config
            cfg.leases_dir.mkdir(parents=True, exist_ok=True)
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _KILLED, str(cfg.leases_dir), cfg.veth_prefix,
                str(cfg.sandboxes_dir / ".netns-stock"), cfg.address_pool,
                stdout=asyncio.subprocess.PIPE)
            assert child.stdout is not None
            veths = (await child.stdout.readline()).decode().split()
            assert len(veths) == 2 and all(_ifindex(v) is not None for v in veths)
            assert len(_stocked(backend)) == 2
            assert all(_egress_objects(v) for v in veths)
            child.send_signal(signal.SIGKILL)
            await child.wait()
            # The kernel takes each namespace, and its veth pair, with the process.
            await _until_gone(veths)
            # The next start (recovery) frees their leases, and the egress sweep removes
            # their objects from the host table.
            await backend.list()
            assert _stocked(backend) == {}
            assert not [v for v in veths if _egress_objects(v)]
    finally:
        remove_tree(data_dir)
