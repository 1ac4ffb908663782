"""Network namespaces made ahead of the creates that need them.

A create pays for its sandbox's network namespace on its path: some 7 ms of the server's
CPU (a dozen netlink calls through pyroute2, two netlink sockets with their own event
loops), which in a burst of creates is one of the largest parts of the server's share.
The stock makes them while the server is quiet, each exactly as a create would
(``create_netns``: its veth pair, addresses, routes and sysctls), with an address leased
to the stock; a new slot takes one (``take``: its lease passed to the slot's directory)
or, the stock empty, makes its own as before.

Nothing of it outlives the process: a namespace no process is in lives only as long as
the descriptor that holds it, so the process's end takes each one with its veth pair; and
a stock lease names a directory that never exists, so the next start's lease sweep frees
it once this process is gone. A namespace taken but not yet given to the slot's runtime
is held for the slot (``claim``, or ``drop`` by its teardown). Refilling waits until no
slot took one for ``QUIET_S``: a burst's creates never compete with it for the CPU.

Each is also given, once made, what its sandbox's egress will have whatever its policy
(``prepare``: ``Egress.prepare``, its objects in the host table and its resolver and relay
listeners), so that a create installs only its policy's elements. A namespace the stock
drops unused has them removed (``unprepare``); one a slot took is the slot's (its
teardown's ``Egress.detach`` removes them); a killed server's are swept at the next start
with its leases (``Egress.sweep``), before the new stock makes any.

SECURITY: a stocked namespace is the same as a fresh one (nothing ran in it) and goes to
one slot only; its veth reaches nothing until the slot's egress policy is installed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bac_server.cancel_safe import cancel_and_wait

from ._addresses import AddressPool, Lease, LeaseOwner
from ._netns import create_netns

_log = logging.getLogger(__name__)

QUIET_S = 1.0  # no take for this long before the stock is refilled
_RETRY_S = 5.0  # after a failure to make one


@dataclass(frozen=True)
class _Ready:
    lease: Lease
    fd: int


# Made for a namespace once it is made, and removed if it goes unused (see above).
LeaseHook = Callable[[Lease], Awaitable[None]]


class NetnsStock:
    def __init__(self, addresses: AddressPool, *, size: int, stock_dir: str,
                 owner: str, prepare: LeaseHook, unprepare: LeaseHook) -> None:
        """``stock_dir``: the directory the stock's leases name (never made: the lease
        sweep frees what a dead process left); ``owner``: this process's token;
        ``prepare``/``unprepare``: what is made for a namespace of the stock, and how it
        is removed if the namespace goes unused."""
        self._prepare = prepare
        self._unprepare = unprepare
        self._addresses = addresses
        self._size = size
        self._owner = LeaseOwner(stock_dir, owner)
        self._ready: list[_Ready] = []
        self._held: dict[int, int] = {}  # lease index -> fd, taken for a slot
        self._wanted = asyncio.Event()
        self._last_take = 0.0
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._ready)

    def start(self) -> None:
        if self._size > 0 and self._task is None:
            self._wanted.set()
            self._task = asyncio.create_task(self._refill_forever())

    def take(self, owner: LeaseOwner) -> Lease | None:
        """A made namespace's address, its lease now ``owner``'s, and the namespace held
        for the slot (``claim``); None when the stock is empty."""
        self._last_take = time.monotonic()
        self._wanted.set()
        while self._ready:
            ready = self._ready.pop()
            if self._addresses.transfer(ready.lease.index, self._owner.slot_dir, owner):
                self._held[ready.lease.index] = ready.fd
                return ready.lease
            # Its lease is not the stock's any more: never hand it out. (What ``prepare``
            # made for it is named by the lease: its holder's to remove.)
            os.close(ready.fd)
            _log.warning("stocked namespace %s lost its lease; dropped", ready.lease.veth)
        return None

    def claim(self, index: int) -> int | None:
        """The descriptor holding the namespace taken for the lease ``index`` (the caller
        closes it once the runtime has joined it); None when none was taken for it."""
        return self._held.pop(index, None)

    def drop(self, index: int) -> None:
        """A slot torn down before it claimed its namespace: the namespace goes."""
        fd = self._held.pop(index, None)
        if fd is not None:
            os.close(fd)

    async def close(self) -> None:
        """Stop refilling; every namespace in the stock goes, with its lease."""
        await cancel_and_wait(self._task)
        self._task = None
        ready_ones, self._ready = self._ready, []
        for ready in ready_ones:
            os.close(ready.fd)
            await self._forget(ready.lease)
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()

    async def _refill_forever(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            while len(self._ready) < self._size:
                quiet = time.monotonic() - self._last_take
                if quiet < QUIET_S:
                    await asyncio.sleep(QUIET_S - quiet)
                    continue
                if not await self._make_one():
                    await asyncio.sleep(_RETRY_S)

    async def _make_one(self) -> bool:
        try:
            lease = self._addresses.lease(self._owner)
        except Exception as exc:  # the pool is full: creates need what is left
            _log.info("network namespace stock not refilled: %s", exc)
            return False
        try:
            fd = await create_netns(lease)
        except Exception:
            self._addresses.release(lease.index, self._owner.slot_dir)
            _log.exception("making a network namespace for the stock failed")
            return False
        except BaseException:
            self._addresses.release(lease.index, self._owner.slot_dir)
            raise
        try:
            await self._prepare(lease)
        except BaseException as exc:
            os.close(fd)  # the namespace goes with its veth pair
            await asyncio.shield(self._forget(lease))
            if not isinstance(exc, Exception):
                raise
            _log.exception("preparing the egress of a stocked network namespace failed")
            return False
        self._ready.append(_Ready(lease, fd))
        return True

    async def _forget(self, lease: Lease) -> None:
        """Remove what was made for an unused namespace of the stock, then its lease (kept
        if that fails: the next start's sweep removes both)."""
        try:
            await self._unprepare(lease)
        except Exception:
            _log.exception("removing the egress of stocked namespace %s failed", lease.veth)
            return
        self._addresses.release(lease.index, self._owner.slot_dir)
