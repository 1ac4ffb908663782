"""What the benchmarks share: the percentile they quote (nearest rank over the sorted
samples, so a p99 of a few dozen samples is one that was measured)."""

from __future__ import annotations


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
