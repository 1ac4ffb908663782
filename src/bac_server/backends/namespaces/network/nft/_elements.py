"""Elements of the host table's sets as nf_tables stores them: keys of concatenated fields.

A key is its fields one after the other, each padded to 4 bytes (nf_tables' registers):
an interface name is 16 bytes (IFNAMSIZ, NUL padded), an IPv4 address 4, a protocol 1 (+3)
and a port 2, big-endian (+2). An element of an interval set also has the key its range
ends at (``end``). nf_tables refuses an interval element that overlaps another one (a
concatenated interval set keeps no merging of its own), so the ranges a policy names are
made disjoint first (``disjoint``, ``disjoint_boxes``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

IFNAMSIZ = 16


@dataclass(frozen=True, order=True)
class Element:
    """One element of set ``set``; ``end`` only in interval sets."""

    set: str
    key: bytes
    end: bytes | None = None


def ifname(name: str) -> bytes:
    raw = name.encode()
    if not 0 < len(raw) < IFNAMSIZ or b"\0" in raw:
        raise ValueError(f"not an interface name: {name!r}")
    return raw.ljust(IFNAMSIZ, b"\0")


def name_in(key: bytes, offset: int = 0) -> str:
    """The interface name a key holds at ``offset``."""
    return key[offset:offset + IFNAMSIZ].split(b"\0", 1)[0].decode(errors="replace")


def address(value: int) -> bytes:
    return value.to_bytes(4, "big")


def protocol(number: int) -> bytes:
    return bytes((number, 0, 0, 0))


def port(number: int) -> bytes:
    return number.to_bytes(2, "big") + b"\0\0"


Range = tuple[int, int]  # inclusive
Box = tuple[Range, Range]  # addresses x ports


def disjoint(ranges: Iterable[Range]) -> list[Range]:
    """The union of ``ranges`` as sorted ranges that neither overlap nor touch."""
    merged: list[Range] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def disjoint_boxes(boxes: Iterable[Box]) -> list[Box]:
    """The union of address x port boxes as boxes that do not overlap: for each stretch
    of addresses the same boxes cover, the union of their ports (neighbouring stretches
    with the same ports joined)."""
    boxes = list(boxes)
    cuts = sorted({a for (low, high), _ in boxes for a in (low, high + 1)})
    stretches: list[tuple[Range, list[Range]]] = []
    for start, stop in itertools.pairwise(cuts):
        ports = disjoint(p for (low, high), p in boxes if low <= start and stop - 1 <= high)
        if not ports:
            continue
        if stretches and stretches[-1][0][1] == start - 1 and stretches[-1][1] == ports:
            stretches[-1] = ((stretches[-1][0][0], stop - 1), ports)
        else:
            stretches.append(((start, stop - 1), ports))
    return [(addresses, p) for addresses, ports in stretches for p in ports]
