"""One matplotlib axis, read back as data: scale, label, unit, ticks, and value conversion.

Matplotlib stores every coordinate as a float; dates and categories are converted on the
way in. `AxisReader.value` undoes that, so a point on a date axis comes back as an ISO
timestamp and a point on a categorical axis as its category name.
"""

from __future__ import annotations

import math
import re
from typing import Any

# E2B's chart model reads a unit from the first " (unit)" or "[unit]" in a label.
_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def unit_of(label: str | None) -> str | None:
    """'Time (s)' → 's', 'Speed [m/s]' → 'm/s', 'Count' → None."""
    if not label:
        return None
    found = _UNIT.search(label)
    return (found.group(1) or found.group(2)) if found else None


def number(value: Any) -> float | None:
    """A JSON-safe float; NaN and infinities become None."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


class AxisReader:
    """Reads one axis (`axes.xaxis` or `axes.yaxis`) of a drawn-or-not figure."""

    def __init__(self, axes: Any, which: str) -> None:
        self._axes = axes
        self._which = which
        self._axis = axes.xaxis if which == "x" else axes.yaxis
        converter = (
            self._axis.get_converter()
            if hasattr(self._axis, "get_converter")
            else getattr(self._axis, "converter", None)
        )
        kind = type(converter).__name__.lower() if converter is not None else ""
        self.is_date = "date" in kind
        self.categories: dict[float, str] = {}
        units = getattr(self._axis, "units", None)
        mapping = getattr(units, "_mapping", None)
        if "category" in kind and isinstance(mapping, dict):
            self.categories = {float(v): str(k) for k, v in mapping.items()}

    @property
    def label(self) -> str | None:
        text = self._axis.get_label().get_text()
        return text or None

    @property
    def scale(self) -> str:
        if self.is_date:
            return "datetime"
        if self.categories:
            return "categorical"
        return str(self._axis.get_scale())

    def value(self, raw: Any) -> float | str | None:
        """A stored coordinate as the user gave it: ISO date, category name, or float."""
        x = number(raw)
        if x is None:
            return None
        if self.is_date:
            from matplotlib import dates

            return str(dates.num2date(x).isoformat())  # type: ignore[no-untyped-call]
        if self.categories:
            return self.categories.get(x, str(raw))
        return x

    def ticks(self) -> tuple[list[float | str | None], list[str]]:
        """Tick positions inside the view limits, converted like values, and their labels."""
        low, high = sorted(self._axis.get_view_interval())
        locations = [t for t in self._axis.get_majorticklocs() if low <= t <= high]
        formatter = self._axis.get_major_formatter()
        try:
            formatter.set_locs(locations)
            labels = [str(formatter(t, i)) for i, t in enumerate(locations)]
        except Exception:
            labels = [str(t) for t in locations]
        values = [self.value(t) for t in locations]
        # Tick steps carry float noise (1.2000000000000002); 12 digits is what was meant.
        return [float(f"{v:.12g}") if isinstance(v, float) else v for v in values], labels

    def label_at(self, position: float) -> str:
        """The tick label at `position`, else the position itself as text."""
        if self.categories and position in self.categories:
            return self.categories[position]
        positions, labels = self.ticks()
        for tick, text in zip(positions, labels, strict=False):
            if isinstance(tick, float) and math.isclose(tick, position) and text:
                return text
        value = self.value(position)
        return str(value)

    def labels(self, as_axis: str) -> dict[str, Any]:
        """The `<axis>_label/_unit` keys every 2-D chart has, named for `as_axis`."""
        return {f"{as_axis}_label": self.label, f"{as_axis}_unit": unit_of(self.label)}

    def describe(self) -> dict[str, Any]:
        """The label, unit, scale and ticks keys of a point (line or scatter) chart."""
        ticks, labels = self.ticks()
        w = self._which
        return {
            **self.labels(w),
            f"{w}_scale": self.scale,
            f"{w}_ticks": ticks,
            f"{w}_tick_labels": labels,
        }
