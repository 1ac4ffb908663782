"""Bac's own nftables table: what sandboxes may send, NAT for what may leave, counters.

Every sandbox's host-side veth is named ``<prefix><n>``. The static part below is
applied in one transaction and is idempotent: objects are added if missing and the fixed
chains are flushed and refilled, while each sandbox's own objects (its policy chain,
the entries in the maps) survive a re-run, so preparing the host again never cuts off
running sandboxes. If the existing table is of an incompatible older shape it is
replaced as a whole. Rules in other tables cannot undo a drop here: in nftables a packet
must pass every base chain on a hook, so an ``accept`` elsewhere does not override ours.

What the table enforces for every sandbox veth, whatever the sandbox's policy:

* ``held_in``/``held_out`` (prerouting and output, before anything else and before
  conntrack sees the packet): nothing reaches or leaves an address in the set ``held``
  (``HELD_SET``: sandboxes suspended with TCP connections, see
  ``backends/namespaces/network/_tcp_hold``), so peers see a stall, not a reset. Chains of their
  own: an older server refreshing the table flushes only the chains it knows;
* prerouting: a sandbox may only send from its own address (reverse-path check);
* input (the host's own addresses): only answers to host-opened connections, DNS to the
  resolver listening for that very sandbox (set ``dns_listeners``), and connections the
  sandbox's nat chain redirected to the egress relay (host-name checks);
* forward: IPv6 never; new connections go to the sandbox's policy chain through the
  verdict map ``egress``; a veth without an entry (a pooled slot, or a sandbox whose
  policy is not installed) is rejected; into a sandbox only answers pass;
* postrouting: what leaves through a non-sandbox interface is masqueraded.
"""

from __future__ import annotations

from ._errors import HostChangeFailed
from ._nft import NftError, nft

TABLE_FAMILY = "inet"
TABLE_NAME = "bac"
T = f"{TABLE_FAMILY} {TABLE_NAME}"
HELD_SET = "held"

# Always denied destinations (unless a server's configuration exempts a range for its
# sandboxes): "this" network, private ranges, carrier NAT, loopback, link-local (cloud
# metadata), IETF protocol assignments, multicast, reserved and broadcast.
# Where the egress relay for host-name checks listens, on each sandbox veth's host end.
EGRESS_PROXY_PORT = 15001

INFRA_DENY = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
              "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "224.0.0.0/3")

_OBJECTS = """\
add table {t}
add chain {t} prerouting {{ type filter hook prerouting priority raw; policy accept; }}
add chain {t} held_in {{ type filter hook prerouting priority raw - 1; policy accept; }}
add chain {t} held_out {{ type filter hook output priority raw - 1; policy accept; }}
add chain {t} input {{ type filter hook input priority filter - 10; policy accept; }}
add chain {t} forward {{ type filter hook forward priority filter - 10; policy accept; }}
add chain {t} postrouting {{ type nat hook postrouting priority srcnat; policy accept; }}
add chain {t} prerouting_nat {{ type nat hook prerouting priority dstnat; policy accept; }}
add chain {t} from_sandbox
add chain {t} to_sandbox
add set {t} infra_deny {{ type ipv4_addr; flags interval; auto-merge; }}
add set {t} dns_listeners {{ type ipv4_addr . ifname; }}
add set {t} {held} {{ type ipv4_addr; }}
add map {t} egress {{ type ifname : verdict; }}
add map {t} proxied {{ type ifname : verdict; }}
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
flush chain {t} postrouting
flush chain {t} prerouting_nat
flush chain {t} from_sandbox
flush chain {t} to_sandbox
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
add rule {t} from_sandbox ct state new iifname vmap @egress
add rule {t} from_sandbox reject with icmpx type admin-prohibited
add rule {t} to_sandbox counter name oifname map @rx_bytes
add rule {t} to_sandbox ct state established,related accept
add rule {t} to_sandbox drop
add rule {t} postrouting iifname "{p}*" oifname != "{p}*" masquerade
add rule {t} prerouting_nat iifname "{p}*" iifname vmap @proxied
"""

# Only when the host forwarded nothing before Bac turned forwarding on: it still forwards
# nothing that neither comes from nor goes to a sandbox.
_GUARD = 'add rule {t} forward iifname != "{p}*" oifname != "{p}*" drop\n'


def _check_prefix(veth_prefix: str) -> None:
    if not veth_prefix.isalnum() or len(veth_prefix) > 6:
        raise ValueError(f"veth prefix must be 1-6 alphanumerics, got {veth_prefix!r}")


def render_ruleset(veth_prefix: str, guard_forwarding: bool = False,
                   table: str = TABLE_NAME) -> str:
    """The static part of the table (``table``: another name, for tests)."""
    _check_prefix(veth_prefix)
    t = f"{TABLE_FAMILY} {table}"
    guard = _GUARD.format(t=t, p=veth_prefix) if guard_forwarding else ""
    return (_OBJECTS.format(t=t, infra=", ".join(INFRA_DENY), held=HELD_SET)
            + _RULES.format(t=t, p=veth_prefix, guard=guard, proxy=EGRESS_PROXY_PORT,
                            held=HELD_SET))


def _has_current_shape(t: str) -> bool:
    try:
        nft(f"list map {t} egress")
    except NftError:
        return False
    return True


def ensure_table(veth_prefix: str, guard_forwarding: bool = False,
                 table: str = TABLE_NAME) -> None:
    """Install or refresh the ``inet bac`` table, keeping every sandbox's own objects.

    A table made by an older version gains what is new here (the ``held`` set and the
    chains dropping its packets) the same way: ``add`` keeps what exists."""
    script = render_ruleset(veth_prefix, guard_forwarding, table)
    t = f"{TABLE_FAMILY} {table}"
    # SECURITY: the only host firewall change Bac makes; it lives in its own table and
    # only matches interfaces named with Bac's veth prefix (and held sandbox addresses).
    try:
        nft(script)
        return
    except NftError as exc:
        if _has_current_shape(t):
            raise HostChangeFailed(f"nft could not refresh table {t}: {exc}") from exc
    try:
        # An older table without the egress objects: replace it whole (sandboxes of an
        # older server had no egress anyway; their veths stay rejected).
        nft(f"add table {t}\ndelete table {t}\n" + script)
    except NftError as exc:
        raise HostChangeFailed(f"nft could not install table {t}: {exc}") from exc


def table_present() -> bool:
    try:
        nft(f"list table {T}")
    except (NftError, OSError):
        return False
    return True
