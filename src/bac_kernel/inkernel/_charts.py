"""matplotlib Figure → chart data (the `chart` of a result, as E2B's SDK parses it).

Each Axes becomes one chart, typed by what was drawn on it: pie (wedges), box_and_whisker
(recorded box plots), bar (bar containers), line (Line2D), scatter (path collections), or
unknown. A figure with several charts (subplots, or lines and scatter on one Axes)
becomes a `superchart` whose elements are those charts.

The keys of each chart are those of E2B's chart model (the `e2b-charts` package): every
chart has `type`, `title`, `elements`; bar and box charts add the `x_`/`y_` `label` and
`unit` (the category axis as x, so a horizontal plot's axes are swapped); line and
scatter charts also `scale`, `ticks` and `tick_labels`. Unnamed series are named as
E2B names them ("Line 1", "Group 1"); lines that only mark a level (grid lines,
`axhline`) are not series.
"""

from __future__ import annotations

from typing import Any

from bac_kernel.inkernel._boxplot_hook import BoxRecord, recorded_boxes
from bac_kernel.inkernel._chart_axis import AxisReader, number

Chart = dict[str, Any]


def figure_to_chart(figure: Any) -> Chart | None:
    try:
        return _figure(figure)
    except Exception:  # a display helper must never break the cell's output
        return None


def _figure(figure: Any) -> Chart | None:
    all_axes = [ax for ax in figure.get_axes() if ax.get_visible()]
    if not all_axes:
        return None
    suptitle = getattr(figure, "_suptitle", None)
    figure_title = suptitle.get_text() if suptitle is not None else None
    charts = [chart for ax in all_axes for chart in _axes_charts(ax)]
    if len(charts) == 1:
        chart = charts[0]
        chart["title"] = chart["title"] or figure_title
        return chart
    return {"type": "superchart", "title": figure_title or None, "elements": charts}


def _label(artist: Any) -> str:
    label = artist.get_label()
    # matplotlib names unlabelled artists "_child0", "_line1", "_nolegend_", ...
    return "" if not label or str(label).startswith("_") else str(label)


def _series_name(artist: Any, prefix: str, default: str) -> str:
    """E2B's name for a series: its label, or "<default> N" for matplotlib's "<prefix>N"."""
    label = str(artist.get_label() or "")
    number = label[len(prefix):]
    return f"{default} {number}" if label.startswith(prefix) and number.isdigit() else label


def _marks_a_level(line: Any) -> bool:
    """A two-point line parallel to an axis: a grid line or `axhline`, not a series."""
    xs, ys = line.get_xdata(), line.get_ydata()
    return len(xs) == 2 and len(ys) == 2 and bool(xs[0] == xs[1] or ys[0] == ys[1])


def _axes_charts(ax: Any) -> list[Chart]:
    from matplotlib.container import BarContainer
    from matplotlib.patches import Wedge

    title = ax.get_title() or None
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        return [{"type": "pie", "title": title, "elements": [_wedge(w) for w in wedges]}]
    x, y = AxisReader(ax, "x"), AxisReader(ax, "y")
    upright = {"title": title, **x.labels("x"), **y.labels("y")}
    sideways = {"title": title, **y.labels("x"), **x.labels("y")}
    boxes = recorded_boxes(ax)
    if boxes:
        elements = _boxes(boxes, x, y)
        planar = sideways if all(record.horizontal for record in boxes) else upright
        return [{"type": "box_and_whisker", **planar, "elements": elements}]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if bars:
        elements = [e for container in bars for e in _bars(container, x, y)]
        horizontal = all(getattr(c, "orientation", "") == "horizontal" for c in bars)
        return [{"type": "bar", **(sideways if horizontal else upright), "elements": elements}]
    charts: list[Chart] = []
    axes_info = {"title": title, **x.describe(), **y.describe()}
    lines = [
        line for line in ax.get_lines()
        if line.get_visible() and len(line.get_xydata()) and not _marks_a_level(line)
    ]
    if lines:
        points = [
            _points(_series_name(line, "_child", "Line"), line.get_xydata(), x, y)
            for line in lines
        ]
        charts.append({"type": "line", **axes_info, "elements": points})
    scatters = [c for c in ax.collections if type(c).__name__ == "PathCollection"]
    if scatters:
        # E2B names a scatter series by its label as matplotlib keeps it, even "_child1".
        points = [_points(str(c.get_label()), c.get_offsets(), x, y) for c in scatters]
        charts.append({"type": "scatter", **axes_info, "elements": points})
    if not charts:
        charts.append({"type": "unknown", "title": title, "elements": []})
    return charts


def _wedge(wedge: Any) -> dict[str, Any]:
    return {
        "label": _label(wedge),
        "angle": round(abs(wedge.theta2 - wedge.theta1), 6),
        "radius": number(wedge.r),
    }


def _points(label: str, xy: Any, x: AxisReader, y: AxisReader) -> dict[str, Any]:
    return {"label": label, "points": [[x.value(px), y.value(py)] for px, py in xy]}


def _bars(container: Any, x: AxisReader, y: AxisReader) -> list[dict[str, Any]]:
    horizontal = getattr(container, "orientation", "vertical") == "horizontal"
    group = _series_name(container, "_container", "Group")
    elements = []
    for rect in container.patches:
        if horizontal:
            where, value = y.label_at(rect.get_y() + rect.get_height() / 2), rect.get_width()
        else:
            where, value = x.label_at(rect.get_x() + rect.get_width() / 2), rect.get_height()
        elements.append({"label": where, "group": group, "value": number(value)})
    return elements


def _boxes(records: list[BoxRecord], x: AxisReader, y: AxisReader) -> list[dict[str, Any]]:
    """One element per box position: a box drawn again at the same place (a second
    `boxplot` call to restyle it) replaces the first, as it does on screen."""
    by_place: dict[tuple[bool, float], dict[str, Any]] = {}
    for record in records:
        place = y if record.horizontal else x
        for stats, position in zip(record.stats, record.positions, strict=False):
            by_place[(record.horizontal, position)] = _box(stats, place.label_at(position))
    return list(by_place.values())


def _box(stats: dict[str, Any], place_label: str) -> dict[str, Any]:
    label = stats.get("label")
    return {
        "label": str(label) if label is not None else place_label,
        "min": number(stats.get("whislo")),
        "first_quartile": number(stats.get("q1")),
        "median": number(stats.get("med")),
        "third_quartile": number(stats.get("q3")),
        "max": number(stats.get("whishi")),
        "outliers": [number(v) for v in stats.get("fliers", [])],
    }
