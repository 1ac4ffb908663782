"""Elements of the host table's sets as nf_tables stores them: keys of concatenated fields.

A key is its fields one after the other, each padded to 4 bytes (nf_tables' registers):
an interface name is 16 bytes (IFNAMSIZ, NUL padded), an IPv4 address 4, a protocol 1 (+3)
and a port 2, big-endian (+2); ``@nh,96,64`` is the source and destination addresses as
one 8-byte field. An element of an interval set also has where its range ends (``end``):
in a concatenated one (pipapo) the key of its last point, in a single-field one (rbtree)
the key just past it, sent as an element of its own flagged as an interval's end
(``Style``). nf_tables refuses an interval element that overlaps another one (a
concatenated interval set keeps no merging of its own), so the ranges a policy names are
made disjoint first (``disjoint``, ``disjoint_boxes``), and a box small enough is listed
point by point instead (``points``).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

IFNAMSIZ = 16


class Style(enum.Enum):
    EXACT = "exact"  # a hash set's key
    END_KEY = "end key"  # pipapo: the range's last key, an attribute of the element
    END_ELEMENT = "end element"  # rbtree: the key past the range, an element of its own


@dataclass(frozen=True, order=True)
class Element:
    """One element of set ``set``; ``end`` only in interval sets (see ``Style``)."""

    set: str
    key: bytes
    end: bytes | None = None
    style: Style = Style.EXACT


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


def past(key: bytes) -> bytes:
    """The key right after ``key`` (as one big-endian number): where an rbtree interval
    whose last key is ``key`` ends."""
    return (int.from_bytes(key, "big") + 1).to_bytes(len(key), "big")


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


def points(boxes: Iterable[Box], most: int) -> tuple[list[tuple[int, int]], list[Box]]:
    """The (address, port) points of the boxes with at most ``most`` of them, and the
    larger boxes as they are."""
    found: list[tuple[int, int]] = []
    large: list[Box] = []
    for box in boxes:
        (low, high), (first, last) = box
        if (high - low + 1) * (last - first + 1) <= most:
            found += _grid(low, high, first, last)
        else:
            large.append(box)
    return found, large


def _grid(low: int, high: int, first: int, last: int) -> Iterator[tuple[int, int]]:
    for value in range(low, high + 1):
        for number in range(first, last + 1):
            yield value, number
