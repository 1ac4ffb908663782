"""Adding and removing elements of the host table's ``ipv4_addr`` sets over raw netlink.

libnftables reads the whole ruleset into its cache before each command, which grows with
the number of sandboxes; one NFT_MSG_NEWSETELEM or DELSETELEM message (pyroute2) costs
the same whatever else the table holds. One socket per user (DNS pins, TCP holds), opened
on first use and again after an I/O error. ``SetElements`` is pyroute2's blocking API,
which runs an event loop of its own: for worker threads, one call at a time.
``LoopSetElements`` is its asyncio API on the caller's event loop, for a change on a
latency path: no hop to a worker thread and back (on a busy 2-vCPU host that hop, with the
GIL passed between threads, cost 2-8 ms of a resume; the message itself ~0.9 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from pyroute2.nftables.main import AsyncNFTables, NFTables, NFTSet

from bac_server.host import TABLE_NAME

_NFPROTO_INET = 1


class SetElements:
    def __init__(self) -> None:
        self._socket: NFTables | None = None
        self._lock = threading.Lock()

    def change(self, command: str, set_name: str, elements: Sequence[dict[str, Any]]) -> None:
        """``add`` or ``del`` ``elements`` of the set; blocking. Raises pyroute2's
        ``NetlinkError`` when the kernel refuses, ``OSError`` when the socket fails (it is
        reopened at the next call)."""
        target = NFTSet(table=TABLE_NAME, name=set_name, key_type="ipv4_addr")
        with self._lock:
            try:
                if self._socket is None:
                    self._socket = NFTables(nfgen_family=_NFPROTO_INET)
                self._socket.set_elems(command, set=target, elements=list(elements))
            except OSError:
                self._close()
                raise

    def _close(self) -> None:
        if self._socket is not None:
            try:
                with contextlib.suppress(OSError):
                    self._socket.close()
            finally:
                self._socket = None

    def close(self) -> None:
        with self._lock:
            self._close()


class LoopSetElements:
    """``SetElements.change`` from the event loop. The socket belongs to the loop that
    opened it; a call from another loop (a test's) opens its own."""

    def __init__(self) -> None:
        self._socket: AsyncNFTables | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    async def change(self, command: str, set_name: str,
                     elements: Sequence[dict[str, Any]]) -> None:
        """As ``SetElements.change``."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._close()
            self._loop, self._lock = loop, asyncio.Lock()
        assert self._lock is not None
        target = NFTSet(table=TABLE_NAME, name=set_name, key_type="ipv4_addr")
        async with self._lock:
            try:
                if self._socket is None:
                    opened = AsyncNFTables(nfgen_family=_NFPROTO_INET)
                    await opened.setup_endpoint()
                    self._socket = opened
                await self._socket.set_elems(command, set=target, elements=list(elements))
            except OSError:
                self._close()
                raise

    def _close(self) -> None:
        if self._socket is not None:
            try:
                with contextlib.suppress(OSError, RuntimeError):
                    self._socket.close()
            finally:
                self._socket = None
