"""Bounded label values: the first ``cap`` distinct values of a label keep their own series,
every later one is counted as ``other``; the choice holds for the process's life, so a
series never changes its meaning between scrapes."""

from __future__ import annotations

OTHER = "other"


class LabelCap:
    def __init__(self, cap: int) -> None:
        self._cap = max(0, cap)
        self._kept: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._kept:
            return value
        if len(self._kept) < self._cap:
            self._kept.add(value)
            return value
        return OTHER
