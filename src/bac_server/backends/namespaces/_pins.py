"""Adding answered addresses to a sandbox's sets over raw netlink, in constant time.

libnftables reads the whole ruleset into its cache before each command, which grows with
the number of sandboxes; a DNS answer must not wait for that. A timed element in an
``ipv4_addr`` set is one NFT_MSG_NEWSETELEM message (pyroute2), whatever else the table
holds; adding an existing element again renews its timeout.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.nftables.main import NFTables, NFTSet

from bac_server.host import TABLE_NAME

_NFPROTO_INET = 1


class PinError(RuntimeError):
    """The set is gone (the policy changed meanwhile) or netlink refused."""


class Pins:
    def __init__(self) -> None:
        self._socket: NFTables | None = None
        self._lock = threading.Lock()  # one netlink socket, used from worker threads

    def add(self, set_name: str, addresses: Sequence[str], ttl_s: int) -> None:
        """Blocking; call from a worker thread."""
        elements = [{"value": a, "timeout": ttl_s * 1000} for a in addresses]
        with self._lock:
            try:
                if self._socket is None:
                    self._socket = NFTables(nfgen_family=_NFPROTO_INET)
                target = NFTSet(table=TABLE_NAME, name=set_name, key_type="ipv4_addr")
                self._socket.set_elems("add", set=target, elements=elements)
            except NetlinkError as exc:
                raise PinError(f"pinning into {set_name} failed: {exc}") from exc
            except OSError as exc:
                self._close()
                raise PinError(f"pinning into {set_name} failed: {exc}") from exc

    def _close(self) -> None:
        if self._socket is not None:
            try:
                self._socket.close()
            finally:
                self._socket = None

    def close(self) -> None:
        with self._lock:
            self._close()
