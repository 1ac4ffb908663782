"""matplotlib Figure → chart data (the `chart` of a result, as E2B's SDK parses it).

Each Axes becomes one chart, typed by what was drawn on it: pie (wedges), box_and_whisker
(recorded box plots), bar (bar containers), line (Line2D), scatter (path collections), or
unknown. A figure with several charts (subplots, or lines and scatter on one Axes)
becomes a `superchart` whose elements are those charts.
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


def _axes_charts(ax: Any) -> list[Chart]:
    from matplotlib.container import BarContainer
    from matplotlib.patches import Wedge

    title = ax.get_title() or None
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        return [{"type": "pie", "title": title, "elements": [_wedge(w) for w in wedges]}]
    x, y = AxisReader(ax, "x"), AxisReader(ax, "y")
    axes_info = {"title": title, **x.describe(), **y.describe()}
    boxes = recorded_boxes(ax)
    if boxes:
        elements = [e for record in boxes for e in _boxes(record, x, y)]
        return [{"type": "box_and_whisker", **axes_info, "elements": elements}]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if bars:
        elements = [e for container in bars for e in _bars(container, x, y)]
        return [{"type": "bar", **axes_info, "elements": elements}]
    charts: list[Chart] = []
    lines = [line for line in ax.get_lines() if line.get_visible() and len(line.get_xydata())]
    if lines:
        points = [_points(line.get_label(), line.get_xydata(), x, y) for line in lines]
        charts.append({"type": "line", **axes_info, "elements": points})
    scatters = [c for c in ax.collections if type(c).__name__ == "PathCollection"]
    if scatters:
        points = [_points(c.get_label(), c.get_offsets(), x, y) for c in scatters]
        charts.append({"type": "scatter", **axes_info, "elements": points})
    if not charts:
        charts.append({"type": "unknown", **axes_info, "elements": []})
    return charts


def _wedge(wedge: Any) -> dict[str, Any]:
    return {
        "label": _label(wedge),
        "angle": round(abs(wedge.theta2 - wedge.theta1), 6),
        "radius": number(wedge.r),
    }


def _points(label: Any, xy: Any, x: AxisReader, y: AxisReader) -> dict[str, Any]:
    name = "" if not label or str(label).startswith("_") else str(label)
    return {"label": name, "points": [[x.value(px), y.value(py)] for px, py in xy]}


def _bars(container: Any, x: AxisReader, y: AxisReader) -> list[dict[str, Any]]:
    horizontal = getattr(container, "orientation", "vertical") == "horizontal"
    group = _label(container)
    elements = []
    for rect in container.patches:
        if horizontal:
            where, value = y.label_at(rect.get_y() + rect.get_height() / 2), rect.get_width()
        else:
            where, value = x.label_at(rect.get_x() + rect.get_width() / 2), rect.get_height()
        elements.append({"label": where, "group": group, "value": number(value)})
    return elements


def _boxes(record: BoxRecord, x: AxisReader, y: AxisReader) -> list[dict[str, Any]]:
    place = y if record.horizontal else x
    elements = []
    for stats, position in zip(record.stats, record.positions, strict=False):
        label = stats.get("label")
        elements.append(
            {
                "label": str(label) if label is not None else place.label_at(position),
                "min": number(stats.get("whislo")),
                "first_quartile": number(stats.get("q1")),
                "median": number(stats.get("med")),
                "third_quartile": number(stats.get("q3")),
                "max": number(stats.get("whishi")),
                "outliers": [number(v) for v in stats.get("fliers", [])],
            }
        )
    return elements
