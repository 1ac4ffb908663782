"""The host table's hold (set ``held`` and its chains) reaches tables made by older code,
and its elements change from the event loop.

Run on a private table (its own name, a veth prefix no interface has, addresses from
TEST-NET-1), never on the shared ``inet bac``."""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import os
import warnings
from collections.abc import Iterator

import pytest
from pyroute2.netlink.exceptions import NetlinkError

from bac_server.backends.namespaces.network.nft import LoopSetElements, SetElements
from bac_server.host import nft, nft_json
from bac_server.host._nftables import ensure_table, render_ruleset

pytestmark = [pytest.mark.root]
_PREFIX = "zq9"


@pytest.fixture
def table() -> Iterator[str]:
    name = f"bachold{os.getpid()}"
    yield name
    nft(f"add table inet {name}\ndelete table inet {name}\n")


def _older_script(table: str) -> str:
    """The ruleset as Bac made it before the hold existed."""
    return "".join(line + "\n" for line in render_ruleset(_PREFIX, table=table).splitlines()
                   if "held" not in line)


def _listing(table: str) -> list[dict[str, object]]:
    return nft_json(f"list table inet {table}")


def _rules(table: str, chain: str) -> list[str]:
    out = nft(f"list chain inet {table} {chain}")
    return [line.strip() for line in out.splitlines() if "@held" in line]


def test_an_older_table_gains_the_hold_and_keeps_its_sandboxes(table: str) -> None:
    """Preparing the host over a table made before the hold adds the set and its drop
    rules (first, at raw priority, both ways) and leaves a sandbox's log chain, elements
    (192.0.2.3 may reach 198.51.100.0/24) and DNS listener as they were; held addresses
    survive the next refresh."""
    nft(_older_script(table))
    t = f"inet {table}"
    nft(f"add chain {t} ok_{_PREFIX}0\n"
        f"add rule {t} ok_{_PREFIX}0 counter\n"
        f'add element {t} log_ok {{ "{_PREFIX}0" : jump ok_{_PREFIX}0 }}\n'
        f'add element {t} egress {{ "{_PREFIX}0" }}\n'
        f"add element {t} allow_net {{ 0xc0000203c6336400-0xc0000203c63364ff }}\n"
        f'add element {t} dns_listeners {{ 192.0.2.10 . "{_PREFIX}0" }}\n')
    before = json.dumps(nft_json(f"list chain {t} ok_{_PREFIX}0"))

    ensure_table(_PREFIX, table=table)

    assert _rules(table, "held_in") == ["ip saddr @held drop", "ip daddr @held drop"]
    assert _rules(table, "held_out") == ["ip daddr @held drop"]
    chains = {c["chain"]["name"]: c["chain"] for c in _listing(table) if "chain" in c}
    assert chains["held_in"]["hook"] == "prerouting" and chains["held_out"]["hook"] == "output"
    assert chains["held_in"]["prio"] < chains["prerouting"]["prio"]
    assert json.dumps(nft_json(f"list chain {t} ok_{_PREFIX}0")) == before
    assert f'"{_PREFIX}0" : jump ok_{_PREFIX}0' in nft(f"list map {t} log_ok")
    assert f'"{_PREFIX}0"' in nft(f"list set {t} egress")
    assert "0xc0000203c6336400-0xc0000203c63364ff" in nft(f"list set {t} allow_net")
    assert "192.0.2.10" in nft(f"list set {t} dns_listeners")

    nft(f"add element {t} held {{ 192.0.2.11 }}")
    ensure_table(_PREFIX, table=table)
    assert "192.0.2.11" in nft(f"list set {t} held")
    assert len(_rules(table, "held_in")) == 2


def test_a_table_of_the_older_shape_is_replaced(table: str) -> None:
    """A table with per-sandbox policy chains (the shape before the host-wide sets) is
    replaced whole: its sandbox objects go, and the static part is the current one."""
    t = f"inet {table}"
    nft(f"add table {t}\nadd map {t} egress {{ type ifname : verdict; }}\n"
        f"add chain {t} p_{_PREFIX}0\nadd rule {t} p_{_PREFIX}0 accept\n"
        f'add element {t} egress {{ "{_PREFIX}0" : jump p_{_PREFIX}0 }}\n')

    ensure_table(_PREFIX, table=table)

    listing = nft(f"list table {t}")
    assert f"p_{_PREFIX}0" not in listing
    assert "ct state new iifname @egress jump decide" in listing
    ensure_table(_PREFIX, table=table)  # and refreshing the current shape keeps it
    assert nft(f"list table {t}") == listing


async def test_set_elements_change_from_the_event_loop(table: str) -> None:
    """One address added and removed by a netlink batch sent from the event loop: the
    kernel's answer is awaited; removing a missing one or using a missing set is refused
    with the kernel's errno; a closed socket is opened again."""
    nft(f"add table inet {table}\nadd set inet {table} held {{ type ipv4_addr; }}\n")
    elements = LoopSetElements(table)

    def held() -> list[object]:
        return [e for item in nft_json(f"list set inet {table} held")
                for e in item.get("set", {}).get("elem", [])]

    try:
        await asyncio.gather(elements.change("add", "held", "192.0.2.7"),
                             elements.change("add", "held", "192.0.2.8"))
        assert sorted(map(str, held())) == ["192.0.2.7", "192.0.2.8"]
        await elements.change("add", "held", "192.0.2.7")  # already there: fine
        await elements.change("del", "held", "192.0.2.7")
        assert held() == ["192.0.2.8"]
        with pytest.raises(NetlinkError) as missing:
            await elements.change("del", "held", "192.0.2.7")
        assert missing.value.code == errno.ENOENT
        with pytest.raises(NetlinkError):
            await elements.change("add", "nosuchset", "192.0.2.9")
        elements.close()
        await elements.change("del", "held", "192.0.2.8")
        assert held() == []
    finally:
        elements.close()


async def test_set_elements_from_many_threads_leave_nothing_open(table: str) -> None:
    """The blocking API called from several worker threads at once changes the set, and
    once closed leaves no socket or event loop for the garbage collector (pyroute2 makes
    one of each per calling thread and closes only the closing thread's)."""
    nft(f"add table inet {table}\nadd set inet {table} held {{ type ipv4_addr; }}\n")
    elements = SetElements(table)
    addresses = [f"192.0.2.{n}" for n in range(20, 28)]
    try:
        await asyncio.gather(*(asyncio.to_thread(
            elements.change, "add", "held", [{"value": a}]) for a in addresses))
    finally:
        elements.close()
    listed = nft(f"list set inet {table} held")
    assert all(a in listed for a in addresses), listed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
