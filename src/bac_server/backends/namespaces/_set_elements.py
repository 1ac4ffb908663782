"""Adding and removing elements of the host table's ``ipv4_addr`` sets over raw netlink.

libnftables reads the whole ruleset into its cache before each command, which grows with
the number of sandboxes; one NFT_MSG_NEWSETELEM or DELSETELEM message (pyroute2) costs
the same whatever else the table holds. One socket per user (DNS pins, TCP holds), opened
on first use and again after an I/O error; pyroute2's blocking API runs an event loop of
its own, so it is used from worker threads only, one at a time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from pyroute2.nftables.main import NFTables, NFTSet

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
