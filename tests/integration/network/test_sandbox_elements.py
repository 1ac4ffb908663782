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
from bac_server.host import DNS_LISTENERS, nft, nft_json
from bac_server.host._nftables import ensure_table

pytestmark = [pytest.mark.root]
_PREFIX = "zq8"
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


def _names(i: int) -> SandboxNames:
    return SandboxNames(f"{_PREFIX}{i}", str(ipaddress.IPv4Address("10.250.0.0") + 2 * i))


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


def _of(veth: str, listing: dict[str, Any]) -> dict[str, Any]:
    """``listing`` without anything of ``veth``: its own objects, its elements."""
    mine = f"_{veth}"
    kept: dict[str, Any] = {}
    for name, body in listing.items():
        if name.endswith(mine):
            continue
        body = dict(body)
        elements = [e for e in body.pop("elem", []) if f'"{veth}"' not in json.dumps(e)]
        if elements:
            body["elem"] = elements
        kept[name] = body
    return kept


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
            offset = 4 if set_name == DNS_LISTENERS else 0
            for element in decoded.get_attr("NFTA_SET_ELEM_LIST_ELEMENTS"):
                key = element.get_attr("NFTA_SET_ELEM_KEY").get_attr("NFTA_DATA_VALUE")
                assert key[offset:offset + 16] == names.key, (set_name, key)
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
        assert f'"{one.names.veth}" . 93.184.216.34' in nft(f"list set inet {table} pin_any")

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
        others = _of(one.names.veth, before)
        assert _of(one.names.veth, changed) == others
        assert _of(one.names.veth, removed) == others
        assert not [n for n in removed if n.endswith(f"_{one.names.veth}")]
        assert f'"{one.names.veth}"' not in json.dumps(removed)
        assert "93.184.216.35" in json.dumps(changed["set pin_0"])  # *.wild.test:443
        assert "93.184.216.34" not in json.dumps(changed)  # dropped by the update
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
        installed = read_installed(socket, table, _PREFIX)
        listed = installed.take(names.veth)
        assert names.veth not in installed.veths()
        assert len(listed.pins) == 1 and listed.elements
        nft(f'delete element inet {table} pin_any {{ "{names.veth}" . 93.184.216.34 }}')
        lost = Element("allow_net", names.key + bytes([192, 0, 2, 0]),
                       names.key + bytes([192, 0, 2, 255]))
        listed.elements.add(lost)
        SandboxRules(socket, table, names, [], listed).remove()
        assert names.veth not in json.dumps(_listing(table))
        assert read_installed(socket, table, _PREFIX).veths() == set()
    finally:
        socket.close()
