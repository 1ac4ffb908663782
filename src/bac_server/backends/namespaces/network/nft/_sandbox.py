"""One sandbox's egress in the host table: its elements, its own objects, their batches.

The table (``bac_server.host._nftables``) is static; a sandbox's policy is elements of its
host-wide sets (``policy_elements``), keyed by the sandbox's veth name (``bacs17``) or
address (``10.202.0.35``), both unique host-wide: they come from its address lease.

* ``egress`` (its policy is installed; without it the veth reaches nothing) and ``open``
  (allow-all mode: what no rule decides is allowed), by veth;
* its CIDR rules: ``allow_net``/``deny_net`` (source . destination ranges),
  ``infra_exempt`` (the infrastructure ranges its server's configuration exempts);
* its CIDR:port rules and ``dnsServers`` (port 53): TCP and UDP, point by point in
  ``allow_point``/``deny_point`` while a box is small (``POINTS_PER_BOX``), else as a box in
  ``allow_box``/``deny_box``;
* its domain rules' answers (``pin_elements``: the resolver pins each address an allowed
  name resolved to, with the answer's TTL as the element's timeout): in ``pin_any`` for a
  rule without ports, else on each port of the rule (``pin_point``, or ``pin_box`` for a
  wide range);
* ``dns_listeners``: the resolver's address on its veth.

Its own objects, for reads bounded by the sandbox: byte counters ``tx_/rx_<veth>`` (map
``tx_bytes``/``rx_bytes``), and the logs of destinations it reached or was refused
(``seen_/blk_<veth>``: bounded sets with counters and expiry, filled by the kernel through
the chains ``ok_/no_<veth>``, reached through ``log_ok``/``log_no``).

Each change is one batch (``NftSocket.commit``): install (objects made if missing, so the
counters and logs of a re-attached sandbox carry on; the elements replaced), update (the
elements replaced, the pins dropped) and remove. What a batch touches is named by the
sandbox and by what this server knows it holds (``Contents``), never found by listing the
table, and each set's kind keeps its changes cheap (see ``KeyShape``): none of them grows
with the number of sandboxes on the host, but for boxes too large to list point by point.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from pyroute2.netlink import nlmsg_base
from pyroute2.netlink.exceptions import NetlinkError

from bac_server.backends.egress import (
    ALL_TRAFFIC,
    EgressPolicy,
    EgressRule,
    RuleKind,
    domain_matches,
)
from bac_server.host import (
    ALLOW_BOX,
    ALLOW_NET,
    ALLOW_POINT,
    DENY_BOX,
    DENY_NET,
    DENY_POINT,
    DNS_LISTENERS,
    EGRESS,
    EXEMPT,
    LOG_NO_MAP,
    LOG_OK_MAP,
    OPEN,
    PIN_ANY,
    PIN_BOX,
    PIN_POINT,
    POINTS_PER_BOX,
    RX_MAP,
    TX_MAP,
    SandboxSet,
)

from . import _messages as m
from ._elements import (
    Box,
    Element,
    Range,
    Style,
    address,
    disjoint,
    disjoint_boxes,
    ifname,
    past,
    points,
    port,
    protocol,
)
from ._installed import Contents
from ._messages import Op
from ._socket import NftSocket

LOG_SIZE = 256  # destinations remembered per sandbox and verdict
LOG_TIMEOUT_MS = 3_600_000
TCP, UDP = 6, 17
_DNS_PORT = 53
# The points a policy's boxes may be listed as; the boxes past it go to a box set.
_POINTS_PER_POLICY = 1024


class PinError(RuntimeError):
    """The sandbox's policy is not installed (any more), or netlink refused."""


@dataclass(frozen=True)
class SandboxNames:
    veth: str
    host_address: str
    sandbox_address: str

    @property
    def key(self) -> bytes:
        """Its veth's name, as the sets keyed by interface hold it."""
        return ifname(self.veth)

    @property
    def source(self) -> bytes:
        """Its address, first in the keys of the sets keyed by connection."""
        return address(int(ipaddress.IPv4Address(self.sandbox_address)))

    def member(self, of: SandboxSet) -> Element:
        return Element(of.name, self.key)

    def own(self, kind: str) -> str:
        """Its own objects: ``tx``/``rx`` counters, ``seen``/``blk`` logs, ``ok``/``no``
        chains."""
        return f"{kind}_{self.veth}"

    @property
    def dns_listener(self) -> Element:
        return Element(DNS_LISTENERS,
                       address(int(ipaddress.IPv4Address(self.host_address))) + self.key)

    def net(self, of: SandboxSet, low: int, high: int) -> Element:
        """Destinations ``low``..``high`` (an rbtree interval of source . destination)."""
        return Element(of.name, self.source + address(low),
                       past(self.source + address(high)), Style.END_ELEMENT)

    def point(self, of: SandboxSet, destination: int, proto: int, number: int) -> Element:
        return Element(of.name, self.source + address(destination) + protocol(proto)
                       + port(number))

    def box(self, of: SandboxSet, destinations: Range, proto: int, ports: Range) -> Element:
        return Element(of.name,
                       self.source + address(destinations[0]) + protocol(proto)
                       + port(ports[0]),
                       self.source + address(destinations[1]) + protocol(proto)
                       + port(ports[1]), Style.END_KEY)


def _addresses(cidr: str) -> Range:
    network = ipaddress.IPv4Network(cidr)
    return int(network.network_address), int(network.broadcast_address)


def _nets(names: SandboxNames, of: SandboxSet, cidrs: Sequence[str]) -> list[Element]:
    return [names.net(of, low, high) for low, high in disjoint(_addresses(c) for c in cidrs)]


def _ports(names: SandboxNames, point_set: SandboxSet, box_set: SandboxSet,
           boxes: Sequence[Box], budget: int) -> list[Element]:
    """Disjoint boxes: the small ones as points while ``budget`` lasts, the rest whole."""
    small, large = points(disjoint_boxes(boxes), POINTS_PER_BOX)
    if len(small) > budget:
        small, large = [], disjoint_boxes(boxes)
    return ([names.point(point_set, a, proto, p) for a, p in small for proto in (TCP, UDP)]
            + [names.box(box_set, a, proto, p) for a, p in large for proto in (TCP, UDP)])


def _boxes(rules: Sequence[EgressRule]) -> list[Box]:
    return [(_addresses(r.value), r.ports) for r in rules
            if r.kind is RuleKind.CIDR and r.ports is not None]


def policy_elements(names: SandboxNames, policy: EgressPolicy,
                    exempt: Sequence[str]) -> frozenset[Element]:
    """Every element the sandbox's policy puts in the host-wide sets."""
    found = [names.member(EGRESS), names.dns_listener]
    if not policy.denies_all:
        found.append(names.member(OPEN))
    found += _nets(names, EXEMPT, exempt)
    found += _nets(names, ALLOW_NET, [r.value for r in policy.allow
                                      if r.kind is RuleKind.CIDR and r.ports is None])
    # Denying everything is the default of allow-list mode (no ``open``) instead.
    found += _nets(names, DENY_NET, [r.value for r in policy.deny if r.kind is RuleKind.CIDR
                                     and r.ports is None and r.value != ALL_TRAFFIC])
    allowed = _boxes(policy.allow)
    if policy.dns_servers and policy.allow_domains():
        # E2B opens them only with domain rules; a resolver is DNS, nothing else of it.
        allowed += [(_addresses(s), (_DNS_PORT, _DNS_PORT)) for s in policy.dns_servers]
    found += _ports(names, ALLOW_POINT, ALLOW_BOX, allowed, _POINTS_PER_POLICY // 2)
    found += _ports(names, DENY_POINT, DENY_BOX, _boxes(policy.deny), _POINTS_PER_POLICY // 2)
    return frozenset(found)


def _wide_cells(policy: EgressPolicy) -> list[Range]:
    """The port ranges of the domain rules too wide to pin point by point, cut where
    any of them starts or ends: each such rule's range is a union of these cells, and
    cells never overlap (nf_tables refuses overlapping elements)."""
    wide = {r.ports for r in policy.allow_domains()
            if r.ports is not None and r.ports[1] - r.ports[0] + 1 > POINTS_PER_BOX}
    cuts = sorted({b for low, high in wide for b in (low, high + 1)})
    return [(start, stop - 1) for start, stop in itertools.pairwise(cuts)
            if any(low <= start and stop - 1 <= high for low, high in wide)]


def pin_elements(names: SandboxNames, policy: EgressPolicy, name: str,
                 destination: str) -> list[Element]:
    """What pinning ``destination``, answered for ``name``, adds: for each domain rule
    allowing the name, the address on the rule's ports (any protocol and port for a rule
    without ports)."""
    value = int(ipaddress.IPv4Address(destination))
    found: list[Element] = []
    cells = None
    for rule in policy.allow_domains():
        if not domain_matches(rule.value, name):
            continue
        if rule.ports is None:
            found.append(Element(PIN_ANY.name, names.source + address(value)))
            continue
        low, high = rule.ports
        if high - low + 1 <= POINTS_PER_BOX:
            found += [names.point(PIN_POINT, value, proto, number)
                      for number in range(low, high + 1) for proto in (TCP, UDP)]
            continue
        cells = _wide_cells(policy) if cells is None else cells
        found += [names.box(PIN_BOX, (value, value), proto, cell) for cell in cells
                  if low <= cell[0] and cell[1] <= high for proto in (TCP, UDP)]
    return list(dict.fromkeys(found))


def _objects(table: str, names: SandboxNames) -> list[nlmsg_base]:
    """Its counters and logs, made if missing (kept if present), and the log chains'
    rules made anew."""
    changes = [m.counter(Op.ADD, table, names.own("tx")),
               m.counter(Op.ADD, table, names.own("rx"))]
    for chain, log, entries in (("ok", "seen", LOG_OK_MAP), ("no", "blk", LOG_NO_MAP)):
        changes += [m.log_set(Op.ADD, table, names.own(log), LOG_SIZE, LOG_TIMEOUT_MS),
                    m.chain(Op.ADD, table, names.own(chain)),
                    m.flush_chain(table, names.own(chain)),
                    m.log_rule(table, names.own(chain), names.own(log)),
                    m.jump_entry(Op.ADD, table, Element(entries, names.key),
                                 names.own(chain))]
    changes += [m.counter_entry(Op.ADD, table, Element(TX_MAP, names.key), names.own("tx")),
                m.counter_entry(Op.ADD, table, Element(RX_MAP, names.key), names.own("rx"))]
    return changes


def _removed_objects(table: str, names: SandboxNames) -> list[nlmsg_base]:
    """The reverse of ``_objects``: what refers to an object goes first."""
    changes = [m.counter_entry(Op.DELETE, table, Element(TX_MAP, names.key), ""),
               m.counter_entry(Op.DELETE, table, Element(RX_MAP, names.key), "")]
    for chain, log, entries in (("ok", "seen", LOG_OK_MAP), ("no", "blk", LOG_NO_MAP)):
        changes += [m.jump_entry(Op.DELETE, table, Element(entries, names.key), ""),
                    m.chain(Op.DELETE, table, names.own(chain)),
                    m.log_set(Op.DELETE, table, names.own(log), 0, 0)]
    changes += [m.counter(Op.DELETE, table, names.own("tx")),
                m.counter(Op.DELETE, table, names.own("rx"))]
    return changes


def _gone(table: str, elements: set[Element]) -> list[nlmsg_base]:
    """Delete ``elements`` whether or not each still exists: added first (a no-op for
    one that does), deleted next, in the same batch."""
    ordered = sorted(elements)
    return m.elements(Op.ADD, table, ordered) + m.elements(Op.DELETE, table, ordered)


def _replace(table: str, held: Contents, new: frozenset[Element]) -> list[nlmsg_base]:
    """The old elements that are not new and every pin go; the new ones are all added
    (a no-op for those there already, and right whatever went meanwhile: a table made
    anew under a running server)."""
    return (_gone(table, (held.elements - new) | set(held.pins))
            + m.elements(Op.ADD, table, sorted(new)))


class SandboxRules:
    """One sandbox's objects and elements in ``table``, changed one batch at a time.

    Blocking (call from a worker thread); one change at a time per sandbox, pins
    included, so a pin decided on a policy never lands after that policy was replaced
    or removed."""

    def __init__(self, socket: NftSocket, table: str, names: SandboxNames,
                 exempt: Sequence[str], held: Contents) -> None:
        self.names = names
        self._socket = socket
        self._table = table
        self._exempt = list(exempt)
        self._held = held
        self._policy: EgressPolicy | None = None
        self._lock = threading.Lock()
        # Its objects were made by this process (``make_objects``): installing skips them.
        self._objects_made = False

    def make_objects(self) -> None:
        """Make its objects ahead of its first policy (a fresh veth's: none exist), in
        one batch; the veth stays out of the set egress."""
        with self._lock:
            self._socket.commit(_objects(self._table, self.names))
            self._objects_made = True

    def install(self, policy: EgressPolicy) -> None:
        """Make its objects (or keep them) and put ``policy``'s elements in place of
        whatever the veth held, in one batch."""
        new = policy_elements(self.names, policy, self._exempt)
        with self._lock:
            objects = [] if self._objects_made else _objects(self._table, self.names)
            try:
                # SECURITY: one batch: the veth enters the set egress (until then
                # everything it sends is refused) together with all of its policy.
                self._socket.commit(objects + _replace(self._table, self._held, new))
            except NetlinkError:
                # The table may be gone with the objects made ahead (``Egress._apply``
                # puts it back and tries again): the next try makes them too.
                self._objects_made = False
                raise
            self._installed(policy, new)

    def update(self, policy: EgressPolicy) -> None:
        """Replace its elements by ``policy``'s; every pinned address goes (names no
        longer allowed must not stay reachable; an allowed one is pinned again at its
        next lookup)."""
        new = policy_elements(self.names, policy, self._exempt)
        with self._lock:
            # SECURITY: the old elements go and the new ones come in one batch: no
            # connection is decided on a mix of both.
            self._socket.commit(_replace(self._table, self._held, new))
            self._installed(policy, new)

    def _installed(self, policy: EgressPolicy, new: frozenset[Element]) -> None:
        self._held.elements = set(new)
        self._held.pins.clear()
        self._policy = policy

    def remove(self) -> None:
        """Delete every object and element of the veth, whatever exists: a veth without
        its objects (never installed, or removed before) has its known elements and its
        memberships deleted all the same."""
        with self._lock:
            self._policy = None
            self._objects_made = False
            objects = self._socket.request(m.get_chain(self._table,
                                                       self.names.own("ok"))) is not None
            base = {self.names.member(EGRESS), self.names.member(OPEN),
                    self.names.dns_listener}
            changes = _removed_objects(self._table, self.names) if objects else []
            changes += _gone(self._table, self._held.elements | set(self._held.pins) | base)
            # SECURITY: the veth's name and the address go to the next sandbox given this
            # lease, so nothing keyed by them may stay: what they hold is known from every
            # batch that added to it (and from the listing at start), pins included.
            self._socket.commit(changes)
            self._held.elements.clear()
            self._held.pins.clear()

    def pin(self, name: str, addresses: Sequence[str], ttl_s: int) -> None:
        """Make ``addresses`` reachable for ``ttl_s`` on the ports of the installed
        policy's domain rules allowing ``name`` (an existing pin's timeout is renewed);
        nothing if none allows it (any more)."""
        with self._lock:
            if self._policy is None:
                raise PinError(f"no policy of {self.names.veth} is installed")
            pins = list(dict.fromkeys(
                e for a in addresses for e in pin_elements(self.names, self._policy, name, a)))
            if not pins:
                return
            # Recorded first: a pin whose batch fails half-way is still deleted later.
            self._held.pinned(pins, ttl_s)
            try:
                # SECURITY: only addresses the resolver answered for a name the installed
                # policy allows (never infrastructure: the caller filters), on its ports.
                self._socket.commit(m.elements(Op.ADD, self._table, pins,
                                               timeout_ms=ttl_s * 1000))
            except (NetlinkError, OSError) as exc:
                raise PinError(f"pinning {', '.join(addresses)} for {name} into the sets "
                               f"of {self.names.veth} failed: {exc}") from exc
