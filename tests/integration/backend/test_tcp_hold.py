"""The host-side hold on a suspended sandbox's TCP connections (``_tcp_hold``), for real:
a host client connected into a runc sandbox, the host table's ``held`` set read with nft."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from backend_harness import Sandbox, SandboxFactory, new_id, slot_record
from runc_fixtures import ECHO_SERVER, runc_fixtures, second_backend

from bac_server.backends.base import SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.backends.namespaces.network import AddressPool, tcp_hold
from bac_server.backends.namespaces.slots import LOCK_MARKER
from bac_server.host import nft, remove_tree

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

_TCP_ESTABLISHED = 1


runc_pair, runc, make = runc_fixtures("hold", tcp_repair=True)


def held() -> set[str]:
    out = subprocess.run(["nft", "-j", "list", "set", "inet", "bac", "held"],
                         capture_output=True, text=True, check=True).stdout
    items = json.loads(out)["nftables"]
    return {e for i in items if "set" in i for e in i["set"].get("elem", [])}


def slot_root(backend: NamespaceBackend, sandbox_id: str) -> Path:
    return backend.config.sandboxes_dir / slot_record(backend, sandbox_id).slot


async def connected(sbx: Sandbox) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The echo server in the sandbox and a host client connected to it."""
    try:
        await sbx.sdk.files.write("/tmp/echo.py", ECHO_SERVER)
    except httpx.TransportError:
        # The SDK pools connections per address across sandboxes: one to an earlier
        # sandbox that had this address is reset on first use, and dropped.
        await sbx.sdk.files.write("/tmp/echo.py", ECHO_SERVER)
    await sbx.sdk.commands.run("python3 /tmp/echo.py", background=True)
    await sbx.run("until [ -e /tmp/echo-ready ]; do sleep 0.02; done")
    reader, writer = await asyncio.open_connection(sbx.address, 7000)
    assert await exchange(reader, writer, b"hello") == b"HELLO"
    return reader, writer


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   data: bytes) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), 20)


def tcp_state(writer: asyncio.StreamWriter) -> tuple[int, int]:
    """The client socket's TCP state and how often it has tried to send again
    (``tcp_info``: retransmissions, or probes while its first send is refused locally,
    as the host's own packets to a held address are)."""
    raw = writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return raw[0], max(raw[2], raw[3])


async def test_paused_sandbox_stalls_its_peers_without_a_reset(runc: NamespaceBackend,
                                                               make: SandboxFactory) -> None:
    """While a sandbox is suspended its address is held: bytes the host sends on an open
    connection are dropped (sent again and again, never answered by a reset) and arrive
    after the wake, which lets go of the address."""
    sbx = await make()
    reader, writer = await connected(sbx)
    try:
        await runc.suspend(sbx.id, memory=True)
        assert sbx.address in held()
        assert tcp_hold.is_held(slot_root(runc, sbx.id))
        writer.write(b"sent while paused")
        await writer.drain()
        deadline = asyncio.get_running_loop().time() + 20
        # No event says "sent again": poll the socket's counters until it has been.
        while (state := tcp_state(writer))[1] == 0:
            assert asyncio.get_running_loop().time() < deadline, state
            await asyncio.sleep(0.02)
        assert state[0] == _TCP_ESTABLISHED, state
        await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
        assert sbx.address not in held()
        assert not tcp_hold.is_held(slot_root(runc, sbx.id))
        late = await asyncio.wait_for(reader.readexactly(len(b"sent while paused")), 20)
        assert late == b"SENT WHILE PAUSED"
        assert await exchange(reader, writer, b"after") == b"AFTER"
    finally:
        writer.close()


async def test_destroying_a_paused_sandbox_releases_its_address(runc: NamespaceBackend,
                                                                make: SandboxFactory) -> None:
    """A suspended sandbox that is destroyed leaves no element in the held set (its
    address is leased to the next sandbox)."""
    sbx = await make()
    _reader, writer = await connected(sbx)
    try:
        await runc.suspend(sbx.id, memory=True)
        assert sbx.address in held()
        await runc.destroy(sbx.id)
        assert sbx.address not in held()
    finally:
        writer.close()


async def test_a_files_only_wake_releases_the_address(runc: NamespaceBackend,
                                                      make: SandboxFactory) -> None:
    """A wake that discards the memory images releases the hold: the old connection is
    then refused by the sandbox's kernel (a reset), not left hanging."""
    sbx = await make()
    reader, writer = await connected(sbx)
    try:
        await runc.suspend(sbx.id, memory=True)
        await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template), memory=False)
        assert sbx.address not in held()
        assert not tcp_hold.is_held(slot_root(runc, sbx.id))
        writer.write(b"anyone there?")
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(reader.readexactly(1), 20)
    finally:
        writer.close()


async def test_a_roll_back_of_a_suspended_sandbox_releases_the_address(
        runc: NamespaceBackend, make: SandboxFactory) -> None:
    """Rolling a suspended sandbox back to a checkpoint discards the suspend's images and
    releases its hold; the checkpoint's copy of the connection is restored closed."""
    sbx = await make()
    reader, writer = await connected(sbx)
    try:
        info = await runc.checkpoint(sbx.id, new_id("c"), memory=True)
        await runc.suspend(sbx.id, memory=True)
        assert sbx.address in held()
        await runc.restore(SandboxSpec(sandbox_id=sbx.id, template=make.template),
                           info.checkpoint_id)
        assert sbx.address not in held()
        assert not tcp_hold.is_held(slot_root(runc, sbx.id))
        writer.write(b"anyone there?")
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(reader.readexactly(1), 20)
        await runc.delete_checkpoint(info.checkpoint_id)
    finally:
        writer.close()


async def test_a_checkpoint_while_running_holds_nothing(runc: NamespaceBackend,
                                                        make: SandboxFactory) -> None:
    """A checkpoint of a sandbox with an open connection leaves no element behind and
    the connection carries on."""
    sbx = await make()
    reader, writer = await connected(sbx)
    try:
        info = await runc.checkpoint(sbx.id, new_id("c"), memory=True)
        assert sbx.address not in held()
        assert not tcp_hold.is_held(slot_root(runc, sbx.id))
        assert await exchange(reader, writer, b"still here") == b"STILL HERE"
        await runc.delete_checkpoint(info.checkpoint_id)
    finally:
        writer.close()


async def test_without_the_set_criu_locks_the_connections(runc: NamespaceBackend,
                                                          make: SandboxFactory,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """When the hold cannot be taken (a host table without the set), the suspend falls
    back to CRIU's own lock in the sandbox's namespace, as older images were saved; the
    wake restores such images with their connections and removes that lock."""
    monkeypatch.setattr(tcp_hold, "HELD_SET", "no_such_set")
    sbx = await make()
    reader, writer = await connected(sbx)
    root = slot_root(runc, sbx.id)
    try:
        await runc.suspend(sbx.id, memory=True)
        assert sbx.address not in held() and not tcp_hold.is_held(root)
        assert (root / LOCK_MARKER).exists()
        assert "CRIU-" in _netns_tables(root)
        await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
        assert not (root / LOCK_MARKER).exists()
        assert "CRIU-" not in _netns_tables(root)
        assert await exchange(reader, writer, b"locked") == b"LOCKED"
    finally:
        writer.close()


def _netns_tables(root: Path) -> str:
    return subprocess.run(["nsenter", f"--net={root / 'netns'}", "nft", "list", "tables"],
                          capture_output=True, text=True, check=True).stdout


async def test_a_restarted_server_releases_holds_nobody_needs(template: TemplateImage,
                                                              runc: NamespaceBackend) -> None:
    """A new backend on the same data directory releases the hold a suspend cut short
    left on a running sandbox (its connections flow again), and removes elements whose
    address no sandbox leases."""
    first, _spec, sbx = await second_backend(runc, template, "hold")
    config = first.config
    reader, writer = await connected(sbx)
    again: NamespaceBackend | None = None
    try:
        await tcp_hold.take(slot_root(first, sbx.id), sbx.address)
        assert sbx.address in held()
        pool = AddressPool(config.address_pool, config.leases_dir, config.veth_prefix)
        stray_index = pool.capacity - 1
        assert pool.owner(stray_index) is None, "the pool's last address is in use"
        stray = pool.describe(stray_index).sandbox_address
        nft(f"add element inet bac held {{ {stray} }}")
        await first.close()
        again = NamespaceBackend(config)
        await again.list()
        assert sbx.address not in held() and stray not in held()
        assert await exchange(reader, writer, b"flows") == b"FLOWS"
        await again.destroy(sbx.id)
    finally:
        writer.close()
        if again is not None:
            await again.close()
        remove_tree(config.data_dir)
