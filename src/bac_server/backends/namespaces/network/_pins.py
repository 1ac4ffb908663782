"""Adding answered addresses to a sandbox's sets over raw netlink, in constant time.

libnftables reads the whole ruleset into its cache before each command, which grows with
the number of sandboxes; a DNS answer must not wait for that. A timed element in an
``ipv4_addr`` set is one netlink message (``_set_elements``), whatever else the table
holds; adding an existing element again renews its timeout.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyroute2.netlink.exceptions import NetlinkError

from ._set_elements import SetElements


class PinError(RuntimeError):
    """The set is gone (the policy changed meanwhile) or netlink refused."""


class Pins:
    def __init__(self) -> None:
        self._elements = SetElements()

    def add(self, set_name: str, addresses: Sequence[str], ttl_s: int) -> None:
        """Blocking; call from a worker thread."""
        elements = [{"value": a, "timeout": ttl_s * 1000} for a in addresses]
        try:
            self._elements.change("add", set_name, elements)
        except (NetlinkError, OSError) as exc:
            raise PinError(f"pinning into {set_name} failed: {exc}") from exc

    def close(self) -> None:
        self._elements.close()
