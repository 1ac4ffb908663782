"""A policy as elements of the host table's sets: keys as nf_tables lays them out, and
ranges made disjoint (nf_tables refuses an interval element overlapping another)."""

from __future__ import annotations

import random

from bac_server.backends.egress import EgressPolicy, WirePolicy, parse_policy
from bac_server.backends.namespaces.network.nft import SandboxNames, pin_sets, policy_elements
from bac_server.backends.namespaces.network.nft._elements import disjoint, disjoint_boxes

_NAMES = SandboxNames("bacs17", "10.202.0.34")


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


def test_a_policy_is_keyed_by_its_veth_in_each_set() -> None:
    policy = parse_policy(WirePolicy(
        ["allowed.test", "*.wild.test:443", "203.0.113.0/24", "198.51.100.0/24:70-90",
         "198.51.100.7:80"], ["0.0.0.0/0", "192.0.2.0/24:25"], ["192.0.2.53"], None))
    found = policy_elements(_NAMES, policy, ["10.9.0.0/16"])
    by_set: dict[str, list[tuple[bytes, bytes | None]]] = {}
    for element in found:
        by_set.setdefault(element.set, []).append((element.key, element.end))
    key = b"bacs17".ljust(16, b"\0")
    assert by_set["egress"] == [(key, None)]
    assert "open" not in by_set  # allow-list mode
    assert by_set["dns_listeners"] == [(bytes([10, 202, 0, 34]) + key, None)]
    assert by_set["allow_net"] == [(key + bytes([203, 0, 113, 0]), key + bytes([203, 0, 113, 255]))]
    assert by_set["infra_exempt"] == [(key + bytes([10, 9, 0, 0]), key + bytes([10, 9, 255, 255]))]
    # The /32 on port 80 lies inside the /24 on 70-90: one box, for TCP and for UDP; the
    # resolver on 53 besides.
    tcp, udp = bytes([6, 0, 0, 0]), bytes([17, 0, 0, 0])
    resolver, net, broadcast = bytes([192, 0, 2, 53]), bytes([198, 51, 100, 0]), \
        bytes([198, 51, 100, 255])
    assert sorted(by_set["allow_port"]) == sorted(
        [(key + resolver + p + _port(53), key + resolver + p + _port(53)) for p in (tcp, udp)]
        + [(key + net + p + _port(70), key + broadcast + p + _port(90)) for p in (tcp, udp)])
    assert sorted(by_set["ports_0"]) == [(key + p + _port(443), key + p + _port(443))
                                         for p in (tcp, udp)]
    assert len(by_set["deny_port"]) == 2 and "deny_net" not in by_set  # 0.0.0.0/0: default
    assert pin_sets(policy, "allowed.test") == ["pin_any"]
    assert pin_sets(policy, "a.wild.test") == ["pin_0"]
    assert pin_sets(policy, "other.test") == []
    assert {e.set for e in policy_elements(_NAMES, EgressPolicy(), [])} == {
        "egress", "open", "dns_listeners"}
