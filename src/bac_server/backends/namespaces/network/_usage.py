"""Reading one sandbox's traffic counters and destination log back from nftables.

The kernel keeps the log itself: every new connection a sandbox opens updates an entry
(address, protocol, port) of its ``seen_`` or ``blk_`` set, with a packet counter and an
expiry, and each set holds at most ``LOG_SIZE`` entries, so the log is bounded without
anything in user space per packet. Names come from the resolver's own bounded log.

Each read asks for the sandbox's own objects over netlink (its two counters, a dump of its
two sets), so it costs the same whatever else the table holds (libnftables would read the
whole table first).
"""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

from pyroute2.netlink import nla
from pyroute2.netlink.exceptions import NetlinkError

from bac_server.backends.egress import Destination, NetworkUsage

from .nft import (
    LOG_TIMEOUT_MS,
    NftSocket,
    SandboxNames,
    counter_bytes,
    decoded_elements,
    get_counter,
    list_elements,
)

MAX_DESTINATIONS = 512
_PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp"}


def _counter(socket: NftSocket, table: str, name: str) -> int:
    try:
        answer = socket.request(get_counter(table, name))
    except (NetlinkError, OSError):
        return 0
    return counter_bytes(answer) if answer is not None else 0


def _link_bytes(veth: str, which: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{veth}/statistics/{which}").read_text())
    except (OSError, ValueError):
        return 0


def link_traffic(veth: str) -> tuple[int, int]:
    """Bytes the sandbox behind ``veth`` sent and received over its link (two sysfs
    reads; 0 for a link that is going)."""
    # The host end's receive counter is what the sandbox sent, and the reverse.
    return _link_bytes(veth, "rx_bytes"), _link_bytes(veth, "tx_bytes")


def _packets(element: nla) -> int:
    expr = element.get_attr("NFTA_SET_ELEM_EXPR")
    if expr is None or expr.get_attr("NFTA_EXPR_NAME") != "counter":
        return 0
    return int(expr.get_attr("NFTA_EXPR_DATA").get_attr("NFTA_COUNTER_PACKETS") or 0)


def _destinations(socket: NftSocket, table: str, set_name: str, allowed: bool,
                  names: dict[str, str], now: float) -> list[Destination]:
    try:
        elements = decoded_elements(socket.dump(list_elements(table, set_name)))
    except (NetlinkError, OSError):
        return []
    found = []
    for element in elements:
        key = element.get_attr("NFTA_SET_ELEM_KEY").get_attr("NFTA_DATA_VALUE")
        if len(key) != 12:
            continue
        address = str(ipaddress.IPv4Address(key[:4]))
        left_ms = int(element.get_attr("NFTA_SET_ELEM_EXPIRATION") or 0)
        age = max(0, LOG_TIMEOUT_MS - left_ms) / 1000
        found.append(Destination(address=address, port=int.from_bytes(key[8:10], "big"),
                                 protocol=_PROTOCOLS.get(key[4], str(key[4])),
                                 allowed=allowed, count=_packets(element) or 1,
                                 name=names.get(address), last_seen=now - age))
    return found


def read_usage(socket: NftSocket, table: str, names: SandboxNames,
               dns_log: list[Destination]) -> NetworkUsage:
    """Counters and destinations, newest first (DNS lookups included); blocking."""
    now = time.time()
    by_address = {d.address: d.name for d in reversed(dns_log) if d.address and d.name}
    destinations = (_destinations(socket, table, names.own("seen"), True, by_address, now)
                    + _destinations(socket, table, names.own("blk"), False, by_address, now)
                    + dns_log)
    destinations.sort(key=lambda d: d.last_seen, reverse=True)
    sent, received = link_traffic(names.veth)
    return NetworkUsage(
        internet_bytes_out=_counter(socket, table, names.own("tx")),
        internet_bytes_in=_counter(socket, table, names.own("rx")),
        total_bytes_out=sent, total_bytes_in=received,
        destinations=tuple(destinations[:MAX_DESTINATIONS]),
    )
