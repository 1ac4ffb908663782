"""Bac's own nftables table: what sandboxes may send, NAT for what may leave, counters.

Every sandbox's host-side veth is named ``<prefix><n>``. The table is static: its chains
and sets are the same whatever sandboxes run, and a sandbox's policy is elements of
host-wide sets (``SANDBOX_SETS``), keyed by the name of its veth (``egress``, ``open``) or
by its address (the rest: a connection is looked up by ``ip saddr . ip daddr``, raw
``@nh,96,64`` where an address range is matched, which the reverse-path check below makes
as unforgeable as the interface). Each set's kind keeps its changes cheap whatever the
table holds (``KeyShape``): hash sets for exact keys, single-field interval sets (a
red-black tree) for address ranges, and a concatenated interval set (pipapo, whose
deletions cost as much as the whole set) only for address-and-port boxes too large to
list as points. A sandbox also has a few objects of its own for bounded reads (byte
counters, two destination logs and the chains filling them, reached through maps keyed
by its veth). Those are added and removed one sandbox at a time over raw netlink
(``backends/namespaces/network/nft``), never by this module.

The static part below is applied in one transaction and is idempotent: objects are added
if missing and the fixed chains are flushed and refilled, while the sets' elements and the
sandboxes' own objects survive a re-run, so preparing the host again never cuts off
running sandboxes. A table of an older shape (one without ``SHAPE_MARK``) is replaced as a
whole; re-attaching then installs each live sandbox's policy again. Rules in other tables
cannot undo a drop here: in nftables a packet must pass every base chain on a hook, so an
``accept`` elsewhere does not override ours.

What the table enforces for every sandbox veth, whatever the sandbox's policy:

* ``held_in``/``held_out`` (prerouting and output, before anything else and before
  conntrack sees the packet): nothing reaches or leaves an address in the set ``held``
  (``HELD_SET``: sandboxes suspended with TCP connections, see
  ``backends/namespaces/network/_tcp_hold``), so peers see a stall, not a reset. Chains of their
  own: an older server refreshing the table flushes only the chains it knows;
* prerouting: a sandbox may only send from its own address (reverse-path check);
* input (the host's own addresses): only answers to host-opened connections, DNS to the
  resolver listening for that very sandbox (set ``dns_listeners``), and connections the
  nat chain ``relay`` redirected to the egress relay (host-name checks);
* forward: IPv6 never; a new connection from a veth in the set ``egress`` (its policy is
  installed) goes through the chain ``decide``, which accepts what the veth's elements
  allow and returns the rest; what is not accepted is refused, so a veth without a
  policy (a pooled slot, or a sandbox whose policy is not installed yet) reaches nothing;
  into a sandbox only answers pass;
* postrouting: what leaves through a non-sandbox interface is masqueraded.

The logs: a refused connection is logged by ``from_sandbox`` and an accepted one by the
later base chain ``forward_log`` (an ``accept`` ends only its own base chain), each
through the sandbox's entry in ``log_no``/``log_ok``. Each map is reached from one rule
only: adding a sandbox's jump entry makes the kernel check every chain reachable from the
base chains, once per path to the map.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._errors import HostChangeFailed
from ._nft import NftError, nft

TABLE_FAMILY = "inet"
TABLE_NAME = "bac"
T = f"{TABLE_FAMILY} {TABLE_NAME}"
HELD_SET = "held"

# Where the egress relay for host-name checks listens, on each sandbox veth's host end.
EGRESS_PROXY_PORT = 15001

# Always denied destinations (unless a server's configuration exempts a range for its
# sandboxes): "this" network, private ranges, carrier NAT, loopback, link-local (cloud
# metadata), IETF protocol assignments, multicast, reserved and broadcast.
INFRA_DENY = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
              "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "224.0.0.0/3")

# A box of addresses x ports with at most this many points (per protocol) is listed point
# by point in a hash set; larger ones go to a pipapo set.
POINTS_PER_BOX = 64


class KeyShape(enum.Enum):
    """How a sandbox's elements are keyed in a host-wide set, and so its backend."""

    IFNAME = "type ifname;"  # hash
    NET = "typeof @nh,96,64; flags interval;"  # source . destination range: rbtree
    PAIR = "typeof @nh,96,64; flags timeout;"  # source . destination: hash
    POINT = "type ipv4_addr . ipv4_addr . inet_proto . inet_service;"  # hash
    POINT_PIN = "type ipv4_addr . ipv4_addr . inet_proto . inet_service; flags timeout;"
    BOX = "type ipv4_addr . ipv4_addr . inet_proto . inet_service; flags interval;"  # pipapo
    BOX_PIN = ("type ipv4_addr . ipv4_addr . inet_proto . inet_service; "
               "flags interval,timeout;")


@dataclass(frozen=True)
class SandboxSet:
    name: str
    shape: KeyShape


EGRESS = SandboxSet("egress", KeyShape.IFNAME)  # the veth's policy is installed
OPEN = SandboxSet("open", KeyShape.IFNAME)  # what no rule decides is allowed
EXEMPT = SandboxSet("infra_exempt", KeyShape.NET)  # infrastructure its server exempts
ALLOW_NET = SandboxSet("allow_net", KeyShape.NET)  # CIDR rules without ports
DENY_NET = SandboxSet("deny_net", KeyShape.NET)
ALLOW_POINT = SandboxSet("allow_point", KeyShape.POINT)  # CIDR:port rules, dnsServers
DENY_POINT = SandboxSet("deny_point", KeyShape.POINT)
ALLOW_BOX = SandboxSet("allow_box", KeyShape.BOX)  # ... too large to list point by point
DENY_BOX = SandboxSet("deny_box", KeyShape.BOX)
# Addresses the resolver answered for a name a domain rule allows, until their TTL ends:
PIN_ANY = SandboxSet("pin_any", KeyShape.PAIR)  # rules without ports: any protocol, port
PIN_POINT = SandboxSet("pin_point", KeyShape.POINT_PIN)  # TCP and UDP, each of its ports
PIN_BOX = SandboxSet("pin_box", KeyShape.BOX_PIN)  # ... port ranges larger than that
SANDBOX_SETS = (EGRESS, OPEN, EXEMPT, ALLOW_NET, DENY_NET, ALLOW_POINT, DENY_POINT,
                ALLOW_BOX, DENY_BOX, PIN_ANY, PIN_POINT, PIN_BOX)
SHAPE_MARK = PIN_POINT.name

# Maps from a veth's name to its own objects.
LOG_OK_MAP = "log_ok"  # : jump <its chain updating its log of accepted destinations>
LOG_NO_MAP = "log_no"  # : jump <... of refused destinations>
TX_MAP = "tx_bytes"  # : <its counter of bytes sent to the internet>
RX_MAP = "rx_bytes"
DNS_LISTENERS = "dns_listeners"  # ipv4_addr . ifname: the resolver listening for a veth

_OBJECTS = """\
add table {t}
add chain {t} prerouting {{ type filter hook prerouting priority raw; policy accept; }}
add chain {t} held_in {{ type filter hook prerouting priority raw - 1; policy accept; }}
add chain {t} held_out {{ type filter hook output priority raw - 1; policy accept; }}
add chain {t} input {{ type filter hook input priority filter - 10; policy accept; }}
add chain {t} forward {{ type filter hook forward priority filter - 10; policy accept; }}
add chain {t} forward_log {{ type filter hook forward priority filter - 5; policy accept; }}
add chain {t} postrouting {{ type nat hook postrouting priority srcnat; policy accept; }}
add chain {t} prerouting_nat {{ type nat hook prerouting priority dstnat; policy accept; }}
add chain {t} from_sandbox
add chain {t} to_sandbox
add chain {t} decide
add chain {t} relay
add set {t} infra_deny {{ type ipv4_addr; flags interval; auto-merge; }}
add set {t} dns_listeners {{ type ipv4_addr . ifname; }}
add set {t} {held} {{ type ipv4_addr; }}
{sandbox_sets}\
add map {t} log_ok {{ type ifname : verdict; }}
add map {t} log_no {{ type ifname : verdict; }}
add map {t} tx_bytes {{ type ifname : counter; }}
add map {t} rx_bytes {{ type ifname : counter; }}
add element {t} infra_deny {{ {infra} }}
"""

# reject (not drop) so a blocked connect fails at once instead of hanging until a timeout.
_RULES = """\
flush chain {t} held_in
flush chain {t} held_out
flush chain {t} prerouting
flush chain {t} input
flush chain {t} forward
flush chain {t} forward_log
flush chain {t} postrouting
flush chain {t} prerouting_nat
flush chain {t} from_sandbox
flush chain {t} to_sandbox
flush chain {t} decide
flush chain {t} relay
add rule {t} held_in ip saddr @{held} drop
add rule {t} held_in ip daddr @{held} drop
add rule {t} held_out ip daddr @{held} drop
add rule {t} prerouting iifname "{p}*" fib saddr . iif oif missing drop
add rule {t} input iifname "{p}*" ct state established,related accept
add rule {t} input iifname "{p}*" meta l4proto {{ tcp, udp }} th dport 53 \
ip daddr . iifname @dns_listeners accept
add rule {t} input iifname "{p}*" tcp dport {proxy} ct status dnat accept
add rule {t} input iifname "{p}*" reject with icmpx type admin-prohibited
add rule {t} forward iifname "{p}*" jump from_sandbox
add rule {t} forward oifname "{p}*" jump to_sandbox
{guard}add rule {t} from_sandbox meta nfproto != ipv4 reject with icmpx type admin-prohibited
add rule {t} from_sandbox counter name iifname map @tx_bytes
add rule {t} from_sandbox ct state established,related accept
add rule {t} from_sandbox ct state new iifname @egress jump decide
add rule {t} from_sandbox ct state new meta l4proto {{ tcp, udp }} iifname vmap @log_no
add rule {t} from_sandbox reject with icmpx type admin-prohibited
add rule {t} decide ip daddr @infra_deny @nh,96,64 != @infra_exempt return
add rule {t} decide @nh,96,64 @pin_any accept
add rule {t} decide {point} @pin_point accept
add rule {t} decide {point} @pin_box accept
add rule {t} decide @nh,96,64 @allow_net accept
add rule {t} decide {point} @allow_point accept
add rule {t} decide {point} @allow_box accept
add rule {t} decide @nh,96,64 @deny_net return
add rule {t} decide {point} @deny_point return
add rule {t} decide {point} @deny_box return
add rule {t} decide iifname @open accept
add rule {t} forward_log iifname "{p}*" ct state new meta l4proto {{ tcp, udp }} \
iifname vmap @log_ok
add rule {t} to_sandbox counter name oifname map @rx_bytes
add rule {t} to_sandbox ct state established,related accept
add rule {t} to_sandbox drop
add rule {t} postrouting iifname "{p}*" oifname != "{p}*" masquerade
add rule {t} prerouting_nat iifname "{p}*" meta nfproto ipv4 meta l4proto tcp jump relay
add rule {t} relay @nh,96,64 @allow_net return
add rule {t} relay meta l4proto tcp @nh,96,64 @pin_any redirect to :{proxy}
add rule {t} relay meta l4proto tcp {point} @pin_point redirect to :{proxy}
add rule {t} relay meta l4proto tcp {point} @pin_box redirect to :{proxy}
"""

# Only when the host forwarded nothing before Bac turned forwarding on: it still forwards
# nothing that neither comes from nor goes to a sandbox.
_GUARD = 'add rule {t} forward iifname != "{p}*" oifname != "{p}*" drop\n'
# A connection as the point and box sets key it. ``@nh,96,64`` is the IPv4 header's source
# and destination addresses, one 64-bit key: matched against address ranges of one source
# by a single-field interval set (a red-black tree, cheap to change), where
# ``ip saddr . ip daddr`` would need a concatenated one (pipapo, whose deletions cost as
# much as the whole set). An address pinned for a name is allowed on the ports of the rules
# naming it; with TCP it goes through the relay, which checks the host name it opens with
# (TLS SNI / HTTP Host), unless a CIDR rule allows the address on every port anyway.
_POINT = "ip saddr . ip daddr . meta l4proto . th dport"


def _check_prefix(veth_prefix: str) -> None:
    if not veth_prefix.isalnum() or len(veth_prefix) > 6:
        raise ValueError(f"veth prefix must be 1-6 alphanumerics, got {veth_prefix!r}")


def render_ruleset(veth_prefix: str, guard_forwarding: bool = False,
                   table: str = TABLE_NAME) -> str:
    """The static part of the table (``table``: another name, for tests)."""
    _check_prefix(veth_prefix)
    t = f"{TABLE_FAMILY} {table}"
    guard = _GUARD.format(t=t, p=veth_prefix) if guard_forwarding else ""
    sandbox_sets = "".join(f"add set {t} {s.name} {{ {s.shape.value} }}\n"
                           for s in SANDBOX_SETS)
    return (_OBJECTS.format(t=t, infra=", ".join(INFRA_DENY), held=HELD_SET,
                            sandbox_sets=sandbox_sets)
            + _RULES.format(t=t, p=veth_prefix, guard=guard, proxy=EGRESS_PROXY_PORT,
                            held=HELD_SET, point=_POINT))


def _exists(what: str) -> bool:
    try:
        nft(f"list {what}")
    except NftError:
        return False
    return True


def ensure_table(veth_prefix: str, guard_forwarding: bool = False,
                 table: str = TABLE_NAME) -> None:
    """Install or refresh the ``inet bac`` table, keeping every sandbox's elements and
    objects.

    A table of this shape made by an older version gains what is new here (the ``held``
    set and the chains dropping its packets) the same way: ``add`` keeps what exists. A
    table of an older shape (per-sandbox policy chains) is replaced whole: until each
    live sandbox's policy is installed again (re-attaching does that) its veth has no
    element in ``egress`` and reaches nothing."""
    script = render_ruleset(veth_prefix, guard_forwarding, table)
    t = f"{TABLE_FAMILY} {table}"
    older = _exists(f"table {t}") and not _exists(f"set {t} {SHAPE_MARK}")
    # SECURITY: the only host firewall change Bac makes; it lives in its own table and
    # only matches interfaces named with Bac's veth prefix (and held sandbox addresses).
    if not older:
        try:
            nft(script)
            return
        except NftError as exc:
            if _exists(f"set {t} {SHAPE_MARK}"):
                raise HostChangeFailed(f"nft could not refresh table {t}: {exc}") from exc
    try:
        nft(f"add table {t}\ndelete table {t}\n" + script)
    except NftError as exc:
        raise HostChangeFailed(f"nft could not install table {t}: {exc}") from exc


def table_present() -> bool:
    try:
        nft(f"list table {T}")
    except (NftError, OSError):
        return False
    return True
