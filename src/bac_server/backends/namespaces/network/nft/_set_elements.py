"""Adding and removing elements of the host table's ``ipv4_addr`` sets over raw netlink.

libnftables reads the whole ruleset into its cache before each command, which grows with
the number of sandboxes; one NFT_MSG_NEWSETELEM or DELSETELEM message (pyroute2) costs
the same whatever else the table holds. Used by the TCP holds (set ``held``), one socket
per user, opened on first use and again after an I/O error. ``SetElements`` is pyroute2's
blocking API, which runs an event loop of its own in each thread that calls it and closes
only the closing thread's: so every call runs on one thread of its own, one call at a
time, and ``close`` closes the socket and its loop there (from the executor's worker threads each
call left a loop and a socket behind).
``LoopSetElements`` changes one address from the caller's event loop, for a change on a
latency path (a pause, a resume): the batch is encoded by pyroute2's message classes and
sent on a plain non-blocking netlink socket, whose acknowledgement the loop awaits. Through
a worker thread the hop and the GIL passed between threads cost 2-8 ms of a busy resume;
pyroute2's own asyncio socket ~1-2 ms of the loop's CPU; this ~0.4 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyroute2.netlink import NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.nfnetlink import NFNL_SUBSYS_NFTABLES
from pyroute2.netlink.nfnetlink.nftsocket import (
    NFT_MSG_DELSETELEM,
    NFT_MSG_NEWSETELEM,
    nft_set_elem_list_msg,
)
from pyroute2.nftables.main import DATA_TYPE_NAME_TO_INFO, NFTables, NFTSet, NFTSetElem

from bac_server.host import TABLE_NAME

from ._socket import NETLINK_NETFILTER, answer_to, batch_begin, batch_end

_NFPROTO_INET = 1
_COMMANDS = {"add": NFT_MSG_NEWSETELEM, "del": NFT_MSG_DELSETELEM}
_ANSWER_TIMEOUT_S = 5.0


class SetElements:
    def __init__(self, table: str = TABLE_NAME) -> None:
        self._table = table
        self._socket: NFTables | None = None
        self._lock = threading.Lock()
        self._thread: ThreadPoolExecutor | None = None

    def change(self, command: str, set_name: str, elements: Sequence[dict[str, Any]]) -> None:
        """``add`` or ``del`` ``elements`` of the set; blocking. Raises pyroute2's
        ``NetlinkError`` when the kernel refuses, ``OSError`` when the socket fails (it is
        reopened at the next call)."""
        with self._lock:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(1, thread_name_prefix="bac-nft-sets")
            self._thread.submit(self._change, command, set_name, list(elements)).result()

    def _change(self, command: str, set_name: str, elements: list[dict[str, Any]]) -> None:
        target = NFTSet(table=self._table, name=set_name, key_type="ipv4_addr")
        try:
            if self._socket is None:
                self._socket = NFTables(nfgen_family=_NFPROTO_INET)
            self._socket.set_elems(command, set=target, elements=elements)
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
        """Close the socket (and its loop) on its thread, and end the thread; the next
        change opens both again."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                try:
                    thread.submit(self._close).result()
                finally:
                    thread.shutdown()


def encode_change(command: str, set_name: str, address: str, sequence: int, *,
                  table: str = TABLE_NAME) -> bytes:
    """``add`` or ``del`` of one IPv4 ``address`` in the set, as one nftables batch: begin,
    the change (acknowledged, with ``sequence``), end. pyroute2's encoders, as ``set_elems``
    uses them."""
    modifier = DATA_TYPE_NAME_TO_INFO["ipv4_addr"][2]()
    modifier.header = None
    change = nft_set_elem_list_msg()
    change["attrs"] = [["NFTA_SET_ELEM_LIST_TABLE", table],
                       ["NFTA_SET_ELEM_LIST_SET", set_name],
                       ["NFTA_SET_ELEM_LIST_ELEMENTS",
                        [NFTSetElem(value=address).as_netlink(modifier)]]]
    change["header"]["type"] = (NFNL_SUBSYS_NFTABLES << 8) | _COMMANDS[command]
    change["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK | (
        NLM_F_CREATE | NLM_F_APPEND if command == "add" else 0)
    change["header"]["sequence_number"] = sequence
    change["nfgen_family"] = _NFPROTO_INET
    batch = b""
    for message in (batch_begin(sequence - 1), change, batch_end(sequence + 1)):
        message.encode()
        batch += message.data
    return batch


class LoopSetElements:
    """``SetElements.change`` of one address, from the event loop. The socket belongs to
    the loop that opened it; a call from another loop (a test's) opens its own."""

    def __init__(self, table: str = TABLE_NAME) -> None:
        self._table = table
        self._socket: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._sequence = 1

    async def change(self, command: str, set_name: str, address: str) -> None:
        """As ``SetElements.change``: raises ``NetlinkError`` when the kernel refuses,
        ``OSError`` when the socket fails or no answer comes (it is reopened next time)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self.close()
            self._loop, self._lock = loop, asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            self._sequence = (self._sequence + 3) % (1 << 30) or 3
            batch = encode_change(command, set_name, address, self._sequence,
                                  table=self._table)
            try:
                if self._socket is None:
                    opened = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC
                                           | socket.SOCK_NONBLOCK, NETLINK_NETFILTER)
                    opened.bind((0, 0))
                    self._socket = opened
                code = await asyncio.wait_for(self._exchange(loop, self._socket, batch),
                                              _ANSWER_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                self.close()
                if isinstance(exc, TimeoutError):
                    raise OSError(f"no answer from netfilter to {command} {address}") from exc
                raise
        if code:
            raise NetlinkError(code, os.strerror(code))

    async def _exchange(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                        batch: bytes) -> int:
        await loop.sock_sendall(sock, batch)
        while True:
            code = answer_to(await loop.sock_recv(sock, 65536), self._sequence)
            if code is not None:
                return code

    def close(self) -> None:
        """Close the socket; the next change opens one again."""
        if self._socket is not None:
            try:
                self._socket.close()
            finally:
                self._socket = None
