"""One sandbox's policy among a thousand: installing, changing, pinning and removing it is
one netlink batch that names only its own elements and objects, and leaves every other
sandbox's exactly as they were.

Run on a private table (its own name, a veth prefix no interface has), never on the
shared ``inet bac``."""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pyroute2.netlink import nlmsg_base
from pyroute2.netlink.nfnetlink.nftsocket import (
    nft_chain_msg,
    nft_rule_msg,
    nft_set_elem_list_msg,
    nft_set_msg,
)

from bac_server.backends.egress import EgressPolicy, WirePolicy, parse_policy
from bac_server.backends.namespaces.network.nft import (
    Contents,
    Element,
    NftSocket,
    SandboxNames,
    SandboxRules,
    read_installed,
)
from bac_server.backends.namespaces.network.nft._messages import nft_obj_msg
from bac_server.host import DNS_LISTENERS, LOG_NO_MAP, LOG_OK_MAP, RX_MAP, TX_MAP, nft, nft_json
from bac_server.host._nftables import ensure_table

pytestmark = [pytest.mark.root]
_PREFIX = "zq8"
_BY_VETH = {"egress", "open", LOG_OK_MAP, LOG_NO_MAP, TX_MAP, RX_MAP}
SANDBOXES = 1000
_POLICIES = [
    EgressPolicy(),
    parse_policy(WirePolicy(["allowed.test", "*.wild.test:443", "api.test:8000-8100",
                             "203.0.113.0/24", "198.51.100.7:80"],
                            ["0.0.0.0/0", "198.51.100.0/24:25"], ["192.0.2.53"], None)),
    parse_policy(WirePolicy(None, ["198.51.100.0/24", "203.0.113.9:22"], None, None)),
    EgressPolicy(internet=False),
]


class RecordingSocket(NftSocket):
    """Keeps every batch it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[nlmsg_base]] = []

    def commit(self, changes: Sequence[nlmsg_base]) -> None:
        self.batches.append(list(changes))
        super().commit(changes)


@pytest.fixture
def table() -> Iterator[str]:
    name = f"bacscale{os.getpid()}"
    ensure_table(_PREFIX, table=name)
    yield name
    nft(f"add table inet {name}\ndelete table inet {name}\n")


_POOL = ipaddress.IPv4Address("10.250.0.0")


def _names(i: int) -> SandboxNames:
    return SandboxNames(f"{_PREFIX}{i}", str(_POOL + 2 * i), str(_POOL + 2 * i + 1))


def _veth_of(source: bytes) -> str | None:
    offset = int.from_bytes(source, "big") - int(_POOL)
    return f"{_PREFIX}{offset // 2}" if 0 <= offset < 2 * SANDBOXES and offset % 2 else None


def _listing(table: str) -> dict[str, Any]:
    """The table as nft lists it, by object, pins' running expiry left out."""
    found: dict[str, Any] = {}
    for item in nft_json(f"list table inet {table}"):
        for kind, body in item.items():
            if kind == "metainfo" or "name" not in body:
                continue
            for element in body.get("elem", []):
                if isinstance(element, dict) and "elem" in element:
                    element["elem"].pop("expires", None)
            found[f"{kind} {body['name']}"] = body
    return found


def _values(item: object) -> Iterator[object]:
    if isinstance(item, dict):
        for value in item.values():
            yield from _values(value)
    elif isinstance(item, list):
        for value in item:
            yield from _values(value)
    else:
        yield item


def _belongs(element: object, names: SandboxNames) -> bool:
    """Whether a listed element is the sandbox's: it names its veth or its address (a
    64-bit source . destination key lists as one number)."""
    source = int(ipaddress.IPv4Address(names.sandbox_address))
    return any(v in (names.veth, names.sandbox_address)
               or (isinstance(v, int) and not isinstance(v, bool) and v >> 32 == source)
               for v in _values(element))


def _of(names: SandboxNames, listing: dict[str, Any]) -> dict[str, Any]:
    """``listing`` without anything of the sandbox: its own objects, its elements."""
    mine = f"_{names.veth}"
    kept: dict[str, Any] = {}
    for name, body in listing.items():
        if name.endswith(mine):
            continue
        body = dict(body)
        elements = [e for e in body.pop("elem", []) if not _belongs(e, names)]
        if elements:
            body["elem"] = elements
        kept[name] = body
    return kept


def _anything_of(names: SandboxNames, listing: dict[str, Any]) -> bool:
    return any(name.endswith(f"_{names.veth}") or
               any(_belongs(e, names) for e in body.get("elem", []))
               for name, body in listing.items())


def _touches_only(batch: Sequence[nlmsg_base], names: SandboxNames) -> None:
    """Every element a batch names is keyed by the veth, every object is the veth's."""
    own = f"_{names.veth}"
    for message in batch:
        message.encode()
        for cls in (nft_set_elem_list_msg, nft_set_msg, nft_chain_msg, nft_rule_msg,
                    nft_obj_msg):
            if message.__class__ is cls:
                decoded = cls(message.data)
                decoded.decode()
                break
        else:
            raise AssertionError(f"unexpected message {message!r}")
        if cls is nft_set_elem_list_msg:
            set_name = decoded.get_attr("NFTA_SET_ELEM_LIST_SET")
            for element in decoded.get_attr("NFTA_SET_ELEM_LIST_ELEMENTS"):
                key = element.get_attr("NFTA_SET_ELEM_KEY").get_attr("NFTA_DATA_VALUE")
                if set_name in _BY_VETH:
                    assert key[:16] == names.key, (set_name, key)
                elif set_name == DNS_LISTENERS:
                    assert key[4:20] == names.key, (set_name, key)
                elif element.get_attr("NFTA_SET_ELEM_FLAGS"):  # an rbtree interval's end
                    assert key[:4] == names.source or \
                        int.from_bytes(key[:4], "big") == int.from_bytes(names.source,
                                                                         "big") + 1, key
                else:
                    assert key[:4] == names.source, (set_name, key)
        else:
            name = (decoded.get_attr("NFTA_SET_NAME") or decoded.get_attr("NFTA_CHAIN_NAME")
                    or decoded.get_attr("NFTA_RULE_CHAIN") or decoded.get_attr("NFTA_OBJ_NAME"))
            assert name.endswith(own), name


def test_one_sandbox_changes_alone_among_a_thousand(table: str) -> None:
    """With a thousand sandboxes' policies in the table, one sandbox's install, update,
    pins and removal each are one batch naming only its elements and objects, and every
    other sandbox's elements and objects list exactly as before; the removal leaves
    nothing of it."""
    socket = RecordingSocket()
    try:
        everyone = []
        for i in range(SANDBOXES):
            rules = SandboxRules(socket, table, _names(i), ["10.9.0.0/16"], Contents())
            rules.install(_POLICIES[i % len(_POLICIES)])
            everyone.append(rules)
        one = everyone[SANDBOXES // 2 + 1]  # an allow-list with domain rules
        one.pin("allowed.test", ["93.184.216.34"], 300)
        before = _listing(table)

        socket.batches.clear()
        one.update(_POLICIES[2])
        one.install(_POLICIES[1])
        one.pin("a.wild.test", ["93.184.216.35", "93.184.216.36"], 60)
        one.pin("nothing.test", ["93.184.216.37"], 60)  # allowed by no rule: no batch
        changed = _listing(table)
        one.remove()
        removed = _listing(table)
        one.remove()  # again: there is nothing left, and that fails nothing

        assert len(socket.batches) == 5
        for batch in socket.batches:
            _touches_only(batch, one.names)
        others = _of(one.names, before)
        assert _of(one.names, changed) == others
        assert _of(one.names, removed) == others
        assert _anything_of(one.names, changed) and not _anything_of(one.names, removed)
        assert "93.184.216.35" in json.dumps(changed["set pin_point"])  # *.wild.test:443
        pinned = int(ipaddress.IPv4Address(one.names.sandbox_address)) << 32 | 0x5DB8D822
        assert pinned in before["set pin_any"]["elem"][0]["elem"].values()
        assert "elem" not in changed["set pin_any"]  # .34, dropped by the update
    finally:
        socket.close()


def test_removal_succeeds_whatever_is_left(table: str) -> None:
    """Removing deletes what exists and fails on nothing that does not: a veth never
    installed, one whose pins expired or went, one known to hold elements it lost; what
    the table held at start is found again by listing it."""
    socket = NftSocket()
    try:
        names = _names(7)
        SandboxRules(socket, table, names, [], Contents()).remove()
        rules = SandboxRules(socket, table, names, [], Contents())
        rules.install(_POLICIES[1])
        rules.pin("allowed.test", ["93.184.216.34"], 300)
        installed = read_installed(socket, table, _veth_of)
        listed = installed.take(names.veth)
        assert names.veth not in installed.veths()
        assert len(listed.pins) == 1 and listed.elements
        source = int(ipaddress.IPv4Address(names.sandbox_address))
        nft(f"delete element inet {table} pin_any {{ {source << 32 | 0x5DB8D822:#x} }}")
        lost = Element("allow_point", names.source + bytes([192, 0, 2, 9, 6, 0, 0, 0, 0, 80, 0,
                                                            0]))
        listed.elements.add(lost)
        SandboxRules(socket, table, names, [], listed).remove()
        assert not _anything_of(names, _listing(table))
        assert read_installed(socket, table, _veth_of).veths() == set()
    finally:
        socket.close()
