"""What the host table holds for each sandbox (by veth): its elements, pins and objects.

A sandbox's elements live in host-wide sets, so removing them means naming each one:
nf_tables cannot delete "every element keyed by this sandbox" without the caller listing
the set, which costs as much as the set holds. So each server knows what it put there:
``Contents`` of a veth is kept up to date by every batch that changes it, and what was
there before this server started (sandboxes it re-attaches or tears down, orphans of a
crash) is read once, at start-up, by listing every set (``read_installed``; an element
keyed by address belongs to the veth of the same lease, ``VethOf``).

That is enough because only the holder of an address lease changes the elements of its
veth and address, and every holder removes them before giving the lease back (a teardown
that fails keeps the lease): a lease this server comes to hold was either empty or listed
at its start.
Removals are made robust the same way anyway: an element is added (a no-op if it exists)
right before it is deleted, so an entry that expired or went meanwhile fails nothing.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyroute2.netlink import nla

from bac_server.host import (
    DNS_LISTENERS,
    LOG_OK_MAP,
    PIN_ANY,
    PIN_BOX,
    PIN_POINT,
    SANDBOX_SETS,
    KeyShape,
)

from ._elements import Element, Style, name_in
from ._messages import decoded_elements, list_elements
from ._socket import NftSocket

_PIN_SETS = {s.name for s in (PIN_ANY, PIN_POINT, PIN_BOX)}
_PIN_GRACE_S = 60.0  # a pin is forgotten only well after nf_tables has let it expire
_INTERVAL_END = 1  # NFT_SET_ELEM_INTERVAL_END
# Who an element belongs to: the veth name its key starts with, or the sandbox address.
_BY_SOURCE = {KeyShape.NET, KeyShape.PAIR, KeyShape.POINT, KeyShape.POINT_PIN,
              KeyShape.BOX, KeyShape.BOX_PIN}
_STYLES = {KeyShape.NET: Style.END_ELEMENT, KeyShape.BOX: Style.END_KEY,
           KeyShape.BOX_PIN: Style.END_KEY}

# The veth of a sandbox address (4 bytes), or None for an address of no sandbox.
VethOf = Callable[[bytes], str | None]


@dataclass
class Contents:
    """A veth's elements in the host-wide sets (its policy's, exact) and its pins (each
    with when it expires, ``time.monotonic``; possibly gone already)."""

    elements: set[Element] = field(default_factory=set)
    pins: dict[Element, float] = field(default_factory=dict)

    def pinned(self, pins: list[Element], ttl_s: int) -> None:
        now = time.monotonic()
        for stale in [p for p, expires in self.pins.items() if expires + _PIN_GRACE_S < now]:
            del self.pins[stale]
        for pin in pins:
            self.pins[pin] = max(self.pins.get(pin, 0.0), now + ttl_s)


@dataclass
class Installed:
    """The table's sandbox contents by veth, as listed at start-up; each is taken over
    (``take``) by whatever next installs or removes that veth's policy."""

    contents: dict[str, Contents] = field(default_factory=dict)
    with_objects: set[str] = field(default_factory=set)  # its counters, logs, chains

    def take(self, veth: str) -> Contents:
        self.with_objects.discard(veth)
        return self.contents.pop(veth, None) or Contents()

    def veths(self) -> set[str]:
        return set(self.contents) | self.with_objects


def _value(attr: nla, name: str) -> bytes:
    data: bytes = attr.get_attr(name).get_attr("NFTA_DATA_VALUE")
    return data


def _listed(socket: NftSocket, table: str, set_name: str,
            shape: KeyShape) -> list[tuple[nla, Element]]:
    """A set's elements (an rbtree interval's start and end as one)."""
    items = decoded_elements(socket.dump(list_elements(table, set_name)))
    style = _STYLES.get(shape, Style.EXACT)
    if style is not Style.END_ELEMENT:
        return [(i, Element(set_name, _value(i, "NFTA_SET_ELEM_KEY"),
                            _value(i, "NFTA_SET_ELEM_KEY_END")
                            if style is Style.END_KEY else None, style)) for i in items]
    # An interval is its start and, flagged, the key past its end: the next one in order.
    ordered = sorted(items, key=lambda i: _value(i, "NFTA_SET_ELEM_KEY"))
    found = []
    for start, end in itertools.pairwise(ordered):
        if not _is_end(start) and _is_end(end):
            found.append((start, Element(set_name, _value(start, "NFTA_SET_ELEM_KEY"),
                                         _value(end, "NFTA_SET_ELEM_KEY"), style)))
    return found


def _is_end(item: nla) -> bool:
    flags = item.get_attr("NFTA_SET_ELEM_FLAGS")
    return bool(flags) and 1 in flags  # pyroute2 decodes the flag bits as their names' keys


def read_installed(socket: NftSocket, table: str, veth_of: VethOf) -> Installed:
    """List every set keyed by sandbox (start-up only: this grows with the sandboxes)."""
    installed = Installed()
    now = time.monotonic()
    for sandbox_set in SANDBOX_SETS:
        for item, element in _listed(socket, table, sandbox_set.name, sandbox_set.shape):
            veth = (veth_of(element.key[:4]) if sandbox_set.shape in _BY_SOURCE
                    else name_in(element.key))
            if veth is None:
                continue
            contents = installed.contents.setdefault(veth, Contents())
            if sandbox_set.name in _PIN_SETS:
                left_ms = item.get_attr("NFTA_SET_ELEM_EXPIRATION") or 0
                contents.pins[element] = now + left_ms / 1000
            else:
                contents.elements.add(element)
    for _item, element in _listed(socket, table, DNS_LISTENERS, KeyShape.IFNAME):
        installed.contents.setdefault(name_in(element.key, 4), Contents()).elements.add(
            element)
    for _item, element in _listed(socket, table, LOG_OK_MAP, KeyShape.IFNAME):
        installed.with_objects.add(name_in(element.key))
    return installed
