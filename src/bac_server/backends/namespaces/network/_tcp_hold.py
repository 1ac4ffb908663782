"""Holding a suspended sandbox's TCP connections on the host: peers see a stall, not a reset.

While a sandbox with established connections exists only as CRIU images, a packet that
reached its network namespace would find no socket and be answered with a reset. The
host table (``inet bac``, see ``bac_server.host._nftables``) drops every packet to or from
an address in its set ``held``, at the raw priority of prerouting (what the sandbox sends,
what is forwarded to it) and output (what the host itself sends). A suspend adds the
sandbox's address before CRIU dumps (``criu dump --network-lock skip``); the wake removes
it once the restore has finished: the tasks run and their sockets are out of repair mode.

Adding or removing is one netlink message (pyroute2's NFT_MSG_NEWSETELEM/DELSETELEM,
<1 ms, sent from the event loop by a pause and a resume), whatever else the table holds.
CRIU's own lock, an nftables table inside the namespace made and deleted through
libnftables, cost ~5 ms at dump and ~15 ms at restore.

The marker ``tcp-held`` in the slot directory names the held address and the boot it was
taken in. It is written before the element is added and removed after it is deleted, so
no element exists that no marker names (a teardown finds and deletes it). A marker from
an earlier boot names nothing: the table is made afresh at each boot, and its address may
belong to another sandbox by now, so only the marker goes.

Errors: ``HoldError`` (netlink refused, e.g. a host table made before the set existed).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
from pathlib import Path

from pyroute2.netlink.exceptions import NetlinkError

from bac_server.host import HELD_SET, TABLE_FAMILY, TABLE_NAME, NftError, nft_json

from ._addresses import AddressPool
from .nft import LoopSetElements, SetElements

_log = logging.getLogger(__name__)
HOLD_MARKER = "tcp-held"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class HoldError(RuntimeError):
    """The held set could not be changed (netlink's errno in the message)."""


class _HeldSet:
    """The set ``held``: one address at a time, from worker threads (``change``) or the
    event loop (``change_on_loop``)."""

    def __init__(self) -> None:
        self._elements = SetElements()
        self._on_loop = LoopSetElements()

    def change(self, command: str, address: str) -> None:
        """``add`` or ``del`` one address; blocking. Deleting a missing one succeeds."""
        try:
            # SECURITY: only ever a sandbox address Bac leased; dropping its packets
            # is all an element does.
            self._elements.change(command, HELD_SET, [{"value": address}])
        except (NetlinkError, OSError) as exc:
            _raise_unless_gone(command, address, exc)

    async def close(self) -> None:
        """Close both sockets; each opens again on its next use."""
        self._on_loop.close()
        await asyncio.to_thread(self._elements.close)

    async def change_on_loop(self, command: str, address: str) -> None:
        """As ``change``, on the running event loop."""
        try:
            await self._on_loop.change(command, HELD_SET, address)
        except (NetlinkError, OSError) as exc:
            _raise_unless_gone(command, address, exc)


def _raise_unless_gone(command: str, address: str, exc: NetlinkError | OSError) -> None:
    if command == "del" and isinstance(exc, NetlinkError) and exc.code == errno.ENOENT:
        return
    raise HoldError(f"{command} {address} in set {HELD_SET}: {exc}") from exc


_held = _HeldSet()


async def close_hold_sockets() -> None:
    """Close the netlink sockets the holds use (a backend's close): the process's one
    set of them, opened again by the next hold."""
    await _held.close()


def _boot_id() -> str:
    return _BOOT_ID.read_text().strip()


def _marker(slot_root: Path) -> Path:
    return slot_root / HOLD_MARKER


def is_held(slot_root: Path) -> bool:
    return _marker(slot_root).exists()


async def take(slot_root: Path, address: str) -> None:
    """Drop every packet to and from ``address`` until ``release``. On failure nothing
    is held and ``HoldError`` says why."""
    ipaddress.IPv4Address(address)  # only addresses Bac leased reach here
    marker = _marker(slot_root)
    marker.write_text(f"{address} {_boot_id()}\n")
    try:
        await _held.change_on_loop("add", address)
    except BaseException:
        with contextlib.suppress(HoldError):
            await _held.change_on_loop("del", address)  # an add that failed half-way
        marker.unlink(missing_ok=True)
        raise


def release(slot_root: Path) -> None:
    """Let the held address's packets through again; blocking, idempotent. Raises
    ``HoldError`` (the marker stays, for a later try) if netlink refuses."""
    address = _held_address(slot_root)
    if address:
        _held.change("del", address)
    _marker(slot_root).unlink(missing_ok=True)


async def release_on_loop(slot_root: Path) -> None:
    """``release`` without leaving the event loop (a resume waits for it)."""
    address = _held_address(slot_root)
    if address:
        await _held.change_on_loop("del", address)
    _marker(slot_root).unlink(missing_ok=True)


def _held_address(slot_root: Path) -> str:
    """The address a marker of this boot names; "" for none (no marker, a marker of an
    earlier boot, or one cut short by a crash before its add ran)."""
    try:
        address, boot = _marker(slot_root).read_text().split()[:2]
    except (FileNotFoundError, ValueError):  # ValueError: fewer than two fields
        return ""
    return address if boot == _boot_id() else ""


def sweep(pool: AddressPool) -> None:
    """Delete elements of ``pool``'s addresses that no lease holds (a crash between a
    hold and the removal of its slot); blocking. Other pools' addresses are left alone."""
    try:
        listing = nft_json(f"list set {TABLE_FAMILY} {TABLE_NAME} {HELD_SET}")
    except (NftError, OSError):
        return  # no set (an older table): nothing can be held
    for item in listing:
        for element in item.get("set", {}).get("elem", []):
            if not isinstance(element, str):
                continue
            address = ipaddress.IPv4Address(element)
            if address not in pool.network:
                continue
            index = (int(address) - int(pool.network.network_address)) // 2
            # Decided on a fresh look: a lease is held for the whole life of a sandbox,
            # so an element without one belongs to nobody.
            if pool.owner(index) is None:
                _log.info("releasing the TCP hold of %s, whose sandbox is gone", address)
                with contextlib.suppress(HoldError):
                    _held.change("del", element)
