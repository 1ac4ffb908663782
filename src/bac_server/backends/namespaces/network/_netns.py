"""A network namespace per sandbox, made by the host over netlink in a few milliseconds.

The namespace is created by a short-lived thread that ``unshare``s only itself, so the
server's own threads never change namespace; if anything goes wrong the thread simply ends
and takes its namespace membership with it. The namespace is kept alive by the returned
file descriptor until the runtime has joined it; after that it lives exactly as long as
the sandbox's processes, and its veth pair disappears with it.

Because the namespace belongs to the host's user namespace, root inside the sandbox has no
``CAP_NET_ADMIN`` or ``CAP_NET_RAW`` over it: it cannot change its address, routes or
firewall, nor send raw (spoofed) packets. What it would have needed is set here instead:
ports below 1024 may be bound and ICMP echo sockets are allowed.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from bac_server.cancel_safe import to_the_end
from bac_server.host._syscalls import CLONE_NEWNET, setns, unshare

from ._addresses import Lease

T = TypeVar("T")

SANDBOX_IFNAME = "eth0"
_SANDBOX_SYSCTLS = {
    "net/ipv4/ip_unprivileged_port_start": "0",
    "net/ipv4/ping_group_range": "0 2147483647",
    "net/ipv6/conf/eth0/disable_ipv6": "1",
}


def _start_thread(fn: Callable[[], T]) -> asyncio.Future[T]:
    """Run ``fn`` in a new thread that exits afterwards (namespace changes die with it)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(ok: bool, value: object) -> None:
        if ok:
            future.set_result(value)  # type: ignore[arg-type]
        else:
            assert isinstance(value, BaseException)
            future.set_exception(value)

    def body() -> None:
        try:
            result = fn()
        except BaseException as exc:
            loop.call_soon_threadsafe(deliver, False, exc)
        else:
            loop.call_soon_threadsafe(deliver, True, result)

    threading.Thread(target=body, name="bac-netns", daemon=True).start()
    return future


def _ifindex(ipr: IPRoute, name: str) -> int:
    # A targeted RTM_GETLINK; link_lookup() would dump every link (thousands of veths).
    index = ipr.link("get", ifname=name)[0]["index"]
    assert isinstance(index, int)
    return index


def _write_sysctls() -> None:
    # /proc/sys/net resolves to the network namespace of the calling thread.
    for name, value in _SANDBOX_SYSCTLS.items():
        Path("/proc/sys", name).write_text(value)


def _make_netns(lease: Lease) -> int:
    host_ns = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    sandbox_ns = -1
    try:
        # One socket on each side (each costs an event loop of pyroute2's own, ~0.3 ms).
        with IPRoute() as host:
            # The lease is ours, so a link with its name is an orphan of a crashed server.
            _delete_link_with(host, lease.veth)
            # SECURITY: unshare affects this throw-away thread only; the server's other
            # threads stay in the host namespace.
            unshare(CLONE_NEWNET)
            sandbox_ns = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                with IPRoute() as inner:
                    inner.link("add", ifname=SANDBOX_IFNAME, kind="veth",
                               peer={"ifname": lease.veth, "net_ns_fd": host_ns})
                    _write_sysctls()
                    lo = 1  # the loopback device is always ifindex 1 in a new namespace
                    eth = _ifindex(inner, SANDBOX_IFNAME)
                    inner.link("set", index=lo, state="up")
                    inner.addr("add", index=eth, local=lease.sandbox_address,
                               address=lease.host_address, prefixlen=32)
                    inner.link("set", index=eth, state="up")
                    inner.route("add", dst="0.0.0.0/0", gateway=lease.host_address, oif=eth)
            finally:
                # SECURITY: back to the host namespace before touching host links.
                setns(host_ns, CLONE_NEWNET)
            veth = _ifindex(host, lease.veth)
            Path(f"/proc/sys/net/ipv6/conf/{lease.veth}/disable_ipv6").write_text("1")
            host.addr("add", index=veth, local=lease.host_address,
                      address=lease.sandbox_address, prefixlen=32)
            host.link("set", index=veth, state="up")
    except BaseException:
        if sandbox_ns >= 0:
            os.close(sandbox_ns)
        _delete_link(lease.veth)
        raise
    finally:
        os.close(host_ns)
    return sandbox_ns


async def create_netns(lease: Lease) -> int:
    """Make the sandbox's network namespace; returns an fd holding it (caller closes)."""
    future = _start_thread(lambda: _make_netns(lease))
    try:
        return await to_the_end(future)
    except asyncio.CancelledError:
        if not future.cancelled() and future.exception() is None:
            os.close(future.result())  # the namespace must not outlive a cancelled create
        raise


def _delete_link(name: str) -> bool:
    with IPRoute() as ipr:
        return _delete_link_with(ipr, name)


def _delete_link_with(ipr: IPRoute, name: str) -> bool:
    try:
        ipr.link("del", ifname=name)
    except NetlinkError as exc:
        if exc.code == errno.ENODEV:
            return False
        raise
    return True


async def delete_veth(name: str) -> None:
    """Remove the host end (and so the pair). Idempotent."""
    await asyncio.to_thread(_delete_link, name)


def _link_names() -> list[object]:
    with IPRoute() as ipr:
        return [link.get_attr("IFLA_IFNAME") for link in ipr.get_links()]


async def host_links_with_prefix(prefix: str) -> list[str]:
    """Host interfaces named ``<prefix><n>`` (sync pyroute2 needs a thread of its own)."""
    names = await asyncio.to_thread(_link_names)
    return [n for n in names if isinstance(n, str) and n.startswith(prefix)
            and n[len(prefix):].isdigit()]
