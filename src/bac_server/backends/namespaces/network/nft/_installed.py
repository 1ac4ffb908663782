"""What the host table holds for each sandbox veth: its elements, its pins, its objects.

A sandbox's elements live in host-wide sets, so removing them means naming each one:
nf_tables cannot delete "every element keyed by this veth" without the caller listing
the set, which costs as much as the set holds. So each server knows what it put there:
``Contents`` of a veth is kept up to date by every batch that changes it, and what was
there before this server started (sandboxes it re-attaches or tears down, orphans of a
crash) is read once, at start-up, by listing every set (``read_installed``).

That is enough because only the holder of a veth's address lease changes its elements,
and every holder removes them before giving the lease back (a teardown that fails keeps
the lease): a veth this server comes to hold was either empty or listed at its start.
Removals are made robust the same way anyway: an element is added (a no-op if it exists)
right before it is deleted, so an entry that expired or went meanwhile fails nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bac_server.host import (
    DNS_LISTENERS,
    LOG_OK_MAP,
    PIN_ANY,
    PINS,
    SANDBOX_SETS,
)

from ._elements import Element, name_in
from ._messages import decoded_elements, list_elements
from ._socket import NftSocket

_PIN_SETS = {s.name for s in (PIN_ANY, *PINS)}
_PIN_GRACE_S = 60.0  # a pin is forgotten only well after nf_tables has let it expire


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


def read_installed(socket: NftSocket, table: str, veth_prefix: str) -> Installed:
    """List every set keyed by a veth (start-up only: this grows with the sandboxes)."""
    installed = Installed()
    now = time.monotonic()
    sets = [(s.name, 0, s.shape) for s in SANDBOX_SETS] + [(DNS_LISTENERS, 4, None)]
    for set_name, offset, shape in sets:
        for item in decoded_elements(socket.dump(list_elements(table, set_name))):
            key = item.get_attr("NFTA_SET_ELEM_KEY").get_attr("NFTA_DATA_VALUE")
            veth = name_in(key, offset)
            if not veth.startswith(veth_prefix):
                continue
            end = None
            if shape is not None and shape.interval:
                end = item.get_attr("NFTA_SET_ELEM_KEY_END").get_attr("NFTA_DATA_VALUE")
            element = Element(set_name, key, end)
            contents = installed.contents.setdefault(veth, Contents())
            if set_name in _PIN_SETS:
                left_ms = item.get_attr("NFTA_SET_ELEM_EXPIRATION") or 0
                contents.pins[element] = now + left_ms / 1000
            else:
                contents.elements.add(element)
    for item in decoded_elements(socket.dump(list_elements(table, LOG_OK_MAP))):
        key = item.get_attr("NFTA_SET_ELEM_KEY").get_attr("NFTA_DATA_VALUE")
        if name_in(key).startswith(veth_prefix):
            installed.with_objects.add(name_in(key))
    return installed
