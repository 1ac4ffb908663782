"""Reading one sandbox's traffic counters and destination log back from nftables.

The kernel keeps the log itself: every new connection a sandbox opens updates an entry
(address, protocol, port) of its ``seen_`` or ``blk_`` set, with a packet counter and an
expiry, and each set holds at most ``LOG_SIZE`` entries, so the log is bounded without
anything in user space per packet. Names come from the resolver's own bounded log.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bac_server.backends.egress import Destination, NetworkUsage
from bac_server.host import TABLE_FAMILY, TABLE_NAME, NftError, nft_json

from ._rules import SandboxNames

_T = f"{TABLE_FAMILY} {TABLE_NAME}"
MAX_DESTINATIONS = 512


def _counter_bytes(name: str) -> int:
    try:
        items = nft_json(f"list counter {_T} {name}")
    except NftError:
        return 0
    for item in items:
        if "counter" in item:
            return int(item["counter"].get("bytes", 0))
    return 0


def _link_bytes(veth: str, which: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{veth}/statistics/{which}").read_text())
    except (OSError, ValueError):
        return 0


def _set_elements(name: str) -> list[dict[str, Any]]:
    try:
        items = nft_json(f"list set {_T} {name}")
    except NftError:
        return []
    for item in items:
        if "set" in item:
            timeout = int(item["set"].get("timeout", 0))
            elements = item["set"].get("elem", [])
            return [dict(e["elem"], set_timeout=timeout) for e in elements
                    if isinstance(e, dict) and "elem" in e]
    return []


def _destinations(set_name: str, allowed: bool, names: dict[str, str],
                  now: float) -> list[Destination]:
    found = []
    for element in _set_elements(set_name):
        value = element.get("val", {}).get("concat", [])
        if len(value) != 3:
            continue
        address, protocol, port = value
        age = max(0, element["set_timeout"] - int(element.get("expires", 0)))
        counter = element.get("counter") or {}
        found.append(Destination(address=str(address), port=int(port), protocol=str(protocol),
                                 allowed=allowed, count=int(counter.get("packets", 0)) or 1,
                                 name=names.get(str(address)), last_seen=now - age))
    return found


def read_usage(names: SandboxNames, dns_log: list[Destination]) -> NetworkUsage:
    """Counters and destinations, newest first (DNS lookups included)."""
    now = time.time()
    by_address = {d.address: d.name for d in reversed(dns_log) if d.address and d.name}
    destinations = (_destinations(names.set("seen"), True, by_address, now)
                    + _destinations(names.set("blk"), False, by_address, now) + dns_log)
    destinations.sort(key=lambda d: d.last_seen, reverse=True)
    return NetworkUsage(
        internet_bytes_out=_counter_bytes(names.set("tx")),
        internet_bytes_in=_counter_bytes(names.set("rx")),
        # The host end's receive counter is what the sandbox sent, and the reverse.
        total_bytes_out=_link_bytes(names.veth, "rx_bytes"),
        total_bytes_in=_link_bytes(names.veth, "tx_bytes"),
        destinations=tuple(destinations[:MAX_DESTINATIONS]),
    )
