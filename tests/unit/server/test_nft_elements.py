"""A policy as elements of the host table's sets: keys as nf_tables lays them out, ranges
made disjoint (nf_tables refuses an interval element overlapping another), small boxes as
points."""

from __future__ import annotations

import random

from bac_server.backends.egress import EgressPolicy, WirePolicy, parse_policy
from bac_server.backends.namespaces.network.nft import (
    SandboxNames,
    pin_elements,
    policy_elements,
)
from bac_server.backends.namespaces.network.nft._elements import (
    Style,
    disjoint,
    disjoint_boxes,
    past,
    points,
)

_NAMES = SandboxNames("bacs17", "10.202.0.34", "10.202.0.35")
_SOURCE = bytes([10, 202, 0, 35])
_TCP, _UDP = bytes([6, 0, 0, 0]), bytes([17, 0, 0, 0])


def _port(number: int) -> bytes:
    return number.to_bytes(2, "big") + b"\0\0"


def _cells(boxes: list[tuple[tuple[int, int], tuple[int, int]]]) -> list[tuple[int, int]]:
    return [(a, p) for (low, high), (first, last) in boxes
            for a in range(low, high + 1) for p in range(first, last + 1)]


def test_boxes_become_disjoint_and_cover_the_same() -> None:
    rng = random.Random(21)
    for _ in range(300):
        boxes = []
        for _ in range(rng.randint(1, 6)):
            low, first = rng.randint(0, 30), rng.randint(0, 20)
            boxes.append(((low, low + rng.randint(0, 10)), (first, first + rng.randint(0, 5))))
        made = disjoint_boxes(boxes)
        cells = _cells(made)
        assert len(cells) == len(set(cells)), (boxes, made)
        assert set(cells) == set(_cells(boxes)), (boxes, made)
    assert disjoint([(5, 10), (1, 3), (4, 4), (20, 30), (25, 26)]) == [(1, 10), (20, 30)]
    assert points([((1, 2), (80, 81)), ((5, 100), (1, 2))], 4) == (
        [(1, 80), (1, 81), (2, 80), (2, 81)], [((5, 100), (1, 2))])
    assert past(bytes([10, 0, 0, 1, 255, 255, 255, 255])) == bytes([10, 0, 0, 2, 0, 0, 0, 0])


def test_a_policy_is_keyed_by_its_sandbox_in_each_set() -> None:
    policy = parse_policy(WirePolicy(
        ["allowed.test", "*.wild.test:443", "203.0.113.0/24", "198.51.100.0/24:70-90",
         "198.51.100.7:80"], ["0.0.0.0/0", "192.0.2.0/24:25"], ["192.0.2.53"], None))
    found = policy_elements(_NAMES, policy, ["10.9.0.0/16"])
    by_set: dict[str, list[tuple[bytes, bytes | None, Style]]] = {}
    for element in found:
        by_set.setdefault(element.set, []).append((element.key, element.end, element.style))
    veth = b"bacs17".ljust(16, b"\0")
    assert by_set["egress"] == [(veth, None, Style.EXACT)]
    assert "open" not in by_set  # allow-list mode
    assert by_set["dns_listeners"] == [(bytes([10, 202, 0, 34]) + veth, None, Style.EXACT)]
    # Ranges of one source are rbtree intervals: the start, and the key past the end.
    assert by_set["allow_net"] == [(_SOURCE + bytes([203, 0, 113, 0]),
                                    _SOURCE + bytes([203, 0, 114, 0]), Style.END_ELEMENT)]
    assert by_set["infra_exempt"] == [(_SOURCE + bytes([10, 9, 0, 0]),
                                       _SOURCE + bytes([10, 10, 0, 0]), Style.END_ELEMENT)]
    # The resolver is one point per protocol; the /32 on port 80 lies inside the /24 on
    # 70-90, too large for points: one box per protocol.
    resolver = _SOURCE + bytes([192, 0, 2, 53])
    assert sorted(by_set["allow_point"]) == [(resolver + p + _port(53), None, Style.EXACT)
                                             for p in (_TCP, _UDP)]
    net, last = _SOURCE + bytes([198, 51, 100, 0]), _SOURCE + bytes([198, 51, 100, 255])
    assert sorted(by_set["allow_box"]) == [(net + p + _port(70), last + p + _port(90),
                                            Style.END_KEY) for p in (_TCP, _UDP)]
    assert len(by_set["deny_box"]) == 2 and "deny_net" not in by_set  # 0.0.0.0/0: default
    assert {e.set for e in policy_elements(_NAMES, EgressPolicy(), [])} == {
        "egress", "open", "dns_listeners"}


def test_an_answer_is_pinned_on_the_ports_of_the_rules_naming_it() -> None:
    policy = parse_policy(WirePolicy(["allowed.test", "*.wild.test:443", "*.wide.test:8000-9000",
                                      "x.wide.test:8500-20000"], ["0.0.0.0/0"], None, None))
    address = bytes([93, 184, 216, 34])
    assert pin_elements(_NAMES, policy, "allowed.test", "93.184.216.34")[0].key == \
        _SOURCE + address
    assert sorted((e.set, e.key) for e in pin_elements(_NAMES, policy, "a.wild.test",
                                                       "93.184.216.34")) == [
        ("pin_point", _SOURCE + address + p + _port(443)) for p in (_TCP, _UDP)]
    assert pin_elements(_NAMES, policy, "other.test", "93.184.216.34") == []
    # Wide ranges go in pieces cut where any of them starts or ends, so none overlaps.
    both = pin_elements(_NAMES, policy, "x.wide.test", "93.184.216.34")
    spans = sorted((int.from_bytes(e.key[12:14], "big"), int.from_bytes(e.end[12:14], "big"))
                   for e in both if e.key[8] == 6 and e.end is not None)
    assert spans == [(8000, 8499), (8500, 9000), (9001, 20000)]
    assert {e.set for e in both} == {"pin_box"}
