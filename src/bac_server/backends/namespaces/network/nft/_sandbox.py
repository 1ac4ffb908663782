"""One sandbox's egress in the host table: its elements, its own objects, their batches.

The table (``bac_server.host._nftables``) is static; a sandbox's policy is elements keyed
by its veth's name (``bacs17``, unique host-wide: it comes from the address lease) in the
host-wide sets (``policy_elements``):

* ``egress`` (its policy is installed; without it the veth reaches nothing) and ``open``
  (allow-all mode: what no rule decides is allowed);
* its address rules: ``allow_net``/``deny_net`` (CIDRs), ``allow_port``/``deny_port``
  (CIDR x port range, TCP and UDP; its ``dnsServers`` on port 53 go in ``allow_port``),
  ``infra_exempt`` (the infrastructure ranges its server's configuration exempts);
* its domain rules: one ``ports_<i>`` set per distinct port range (``port_slots``) that
  the resolver's answers pinned into ``pin_<i>`` may be reached on, ``pin_any`` for
  rules without ports (``pin``: the answer's TTL as the element's timeout);
* ``dns_listeners``: the resolver's address on its veth.

Its own objects, for reads bounded by the sandbox: byte counters ``tx_/rx_<veth>`` (map
``tx_bytes``/``rx_bytes``), and the logs of destinations it reached or was refused
(``seen_/blk_<veth>``: bounded sets with counters and expiry, filled by the kernel through
the chains ``ok_/no_<veth>``, reached through ``log_ok``/``log_no``).

Each change is one batch (``NftSocket.commit``): install (objects made if missing, so the
counters and logs of a re-attached sandbox carry on; the elements replaced), update (the
elements replaced, the pins dropped) and remove. What a batch touches is named by the veth
and by what this server knows the veth holds (``Contents``), never found by listing the
table, so none of them grows with the number of sandboxes on the host.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from pyroute2.netlink import nlmsg_base
from pyroute2.netlink.exceptions import NetlinkError

from bac_server.backends.egress import (
    ALL_TRAFFIC,
    MAX_DOMAIN_PORT_RANGES,
    EgressPolicy,
    EgressRule,
    RuleKind,
    domain_matches,
)
from bac_server.host import (
    ALLOW_NET,
    ALLOW_PORT,
    DENY_NET,
    DENY_PORT,
    DNS_LISTENERS,
    EGRESS,
    EXEMPT,
    LOG_NO_MAP,
    LOG_OK_MAP,
    OPEN,
    PIN_ANY,
    PINS,
    PORT_SLOTS,
    PORTS,
    RX_MAP,
    TX_MAP,
    SandboxSet,
)

from . import _messages as m
from ._elements import (
    Box,
    Element,
    Range,
    address,
    disjoint,
    disjoint_boxes,
    ifname,
    port,
    protocol,
)
from ._installed import Contents
from ._messages import Op
from ._socket import NftSocket

assert MAX_DOMAIN_PORT_RANGES <= PORT_SLOTS
LOG_SIZE = 256  # destinations remembered per sandbox and verdict
LOG_TIMEOUT_MS = 3_600_000
TCP, UDP = 6, 17
_DNS_PORT = 53


class PinError(RuntimeError):
    """The sandbox's policy is not installed (any more), or netlink refused."""


@dataclass(frozen=True)
class SandboxNames:
    veth: str
    host_address: str

    @property
    def key(self) -> bytes:
        return ifname(self.veth)

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


def port_slots(policy: EgressPolicy) -> list[tuple[int, int]]:
    """The distinct port ranges of the domain allow rules, in a stable order."""
    return [p for p in dict.fromkeys(r.ports for r in policy.allow_domains()) if p is not None]


def pin_sets(policy: EgressPolicy, name: str) -> list[str]:
    """The sets an address answered for ``name`` is pinned into: one per port range of
    the domain rules allowing the name (``pin_any`` for a rule without ports)."""
    slots = port_slots(policy)
    found = []
    for rule in policy.allow_domains():
        if domain_matches(rule.value, name):
            found.append(PIN_ANY.name if rule.ports is None
                         else PINS[slots.index(rule.ports)].name)
    return list(dict.fromkeys(found))


def _addresses(cidr: str) -> Range:
    network = ipaddress.IPv4Network(cidr)
    return int(network.network_address), int(network.broadcast_address)


def _nets(names: SandboxNames, of: SandboxSet, cidrs: Sequence[str]) -> list[Element]:
    return [Element(of.name, names.key + address(low), names.key + address(high))
            for low, high in disjoint(_addresses(c) for c in cidrs)]


def _net_ports(names: SandboxNames, of: SandboxSet, boxes: Sequence[Box]) -> list[Element]:
    return [Element(of.name,
                    names.key + address(low) + protocol(proto) + port(first),
                    names.key + address(high) + protocol(proto) + port(last))
            for (low, high), (first, last) in disjoint_boxes(boxes) for proto in (TCP, UDP)]


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
    found += _net_ports(names, ALLOW_PORT, allowed)
    found += _net_ports(names, DENY_PORT, _boxes(policy.deny))
    for slot, (first, last) in enumerate(port_slots(policy)):
        found += [Element(PORTS[slot].name, names.key + protocol(proto) + port(first),
                          names.key + protocol(proto) + port(last)) for proto in (TCP, UDP)]
    return frozenset(found)


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

    def install(self, policy: EgressPolicy) -> None:
        """Make its objects (or keep them) and put ``policy``'s elements in place of
        whatever the veth held, in one batch."""
        new = policy_elements(self.names, policy, self._exempt)
        with self._lock:
            # SECURITY: one batch: the veth enters the set egress (until then everything
            # it sends is refused) together with all of its policy, never without.
            self._socket.commit(_objects(self._table, self.names)
                                + _replace(self._table, self._held, new))
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
            objects = self._socket.request(m.get_chain(self._table,
                                                       self.names.own("ok"))) is not None
            base = {self.names.member(EGRESS), self.names.member(OPEN),
                    self.names.dns_listener}
            changes = _removed_objects(self._table, self.names) if objects else []
            changes += _gone(self._table, self._held.elements | set(self._held.pins) | base)
            # SECURITY: the veth's name goes to the next sandbox given this address lease,
            # so nothing keyed by it may stay: what it holds is known from every batch
            # that added to it (and from the listing at start), pins included.
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
            pins = [Element(s, self.names.key + address(int(ipaddress.IPv4Address(a))))
                    for s in pin_sets(self._policy, name) for a in addresses]
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
