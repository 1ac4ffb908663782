"""Remember the statistics each box plot is drawn from, on the Axes that draws it.

Box plots are a dozen anonymous lines once drawn; their quartiles cannot be read back
reliably. Every box plot in matplotlib (and seaborn) goes through `Axes.bxp` with the
computed statistics, so wrapping that method records exactly what was drawn. The wrap is
applied when matplotlib's axes module is imported, so a kernel that never plots never
imports matplotlib.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bac_kernel.inkernel._on_import import when_imported

_TARGET = "matplotlib.axes._axes"
_RECORDS = "_bac_box_records"


@dataclass
class BoxRecord:
    """One `bxp` call: per-box statistics, positions, and the median lines it drew."""

    stats: list[dict[str, Any]]
    positions: list[float]
    horizontal: bool
    medians: list[Any]


def recorded_boxes(axes: Any) -> list[BoxRecord]:
    """Records of box plots still present on `axes` (a cleared axes drops its lines)."""
    present = set(map(id, axes.lines)) | set(map(id, axes.patches))
    records: list[BoxRecord] = getattr(axes, _RECORDS, [])
    return [r for r in records if r.medians and all(id(m) in present for m in r.medians)]


def _wrap(axes_class: type) -> None:
    original = axes_class.bxp  # type: ignore[attr-defined]
    if getattr(original, "_bac_wrapped", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def bxp(self: Any, *args: Any, **kwargs: Any) -> Any:
        artists = original(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # best effort: the plot itself is drawn
            bound = signature.bind(self, *args, **kwargs).arguments
            stats = [dict(s) for s in bound["bxpstats"]]
            positions: Sequence[float] = bound.get("positions") or range(1, len(stats) + 1)
            horizontal = bound.get("vert") is False or bound.get("orientation") == "horizontal"
            record = BoxRecord(
                stats, [float(p) for p in positions], horizontal, list(artists.get("medians", []))
            )
            setattr(self, _RECORDS, [*getattr(self, _RECORDS, []), record])
        return artists

    bxp._bac_wrapped = True  # type: ignore[attr-defined]
    axes_class.bxp = bxp  # type: ignore[attr-defined]


def install() -> None:
    when_imported(_TARGET, lambda module: _wrap(module.Axes))
