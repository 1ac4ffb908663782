"""matplotlib figures come back as a PNG *and* as structured chart data, per chart type."""

from __future__ import annotations

import base64
import datetime

from e2b_code_interpreter import Sandbox
from e2b_code_interpreter.charts import (
    BarChart,
    BoxAndWhiskerChart,
    ChartType,
    LineChart,
    PieChart,
    ScatterChart,
    SuperChart,
)


def _chart(sandbox: Sandbox, code: str):  # type: ignore[no-untyped-def]
    execution = sandbox.run_code("import matplotlib.pyplot as plt\n" + code + "\nplt.show()")
    assert execution.error is None, execution.error
    (result,) = execution.results
    assert base64.b64decode(result.png).startswith(b"\x89PNG")
    assert result.chart is not None
    return result.chart


def test_line_chart(sandbox: Sandbox) -> None:
    """Lines: title, labels with units, datetime x scale, ISO ticks, every point."""
    code = (
        "import datetime\n"
        "days = [datetime.date(2024, 3, 1) + datetime.timedelta(days=i) for i in range(10)]\n"
        "plt.figure()\n"
        "plt.plot(days, [i * i for i in range(10)], label='square')\n"
        "plt.plot(days, list(range(10)), label='linear')\n"
        "plt.xlabel('Date (day)'); plt.ylabel('Value (m)'); plt.title('Growth')"
    )
    chart = _chart(sandbox, code)
    assert isinstance(chart, LineChart)
    assert chart.title == "Growth"
    assert (chart.x_label, chart.x_unit, chart.y_label, chart.y_unit) == (
        "Date (day)", "day", "Value (m)", "m",
    )  # fmt: skip
    assert chart.x_scale == "datetime" and chart.y_scale == "linear"
    assert all(
        isinstance(datetime.datetime.fromisoformat(t), datetime.datetime) for t in chart.x_ticks
    )
    assert len(chart.x_ticks) == len(chart.x_tick_labels) > 0
    assert [e.label for e in chart.elements] == ["square", "linear"]
    first = chart.elements[0].points
    assert len(first) == 10
    assert datetime.datetime.fromisoformat(first[3][0]).date() == datetime.date(2024, 3, 4)
    assert first[3][1] == 9.0


def test_scatter_chart_with_log_scale(sandbox: Sandbox) -> None:
    """Scatter: points of each collection, and the axis scale as set."""
    code = (
        "plt.figure()\n"
        "plt.scatter([1, 2, 3], [10, 100, 1000], label='pts')\n"
        "plt.yscale('log'); plt.title('Scatter')"
    )
    chart = _chart(sandbox, code)
    assert isinstance(chart, ScatterChart)
    assert chart.y_scale == "log"
    (element,) = chart.elements
    assert element.label == "pts"
    assert element.points == [(1.0, 10.0), (2.0, 100.0), (3.0, 1000.0)]


def test_bar_chart_with_groups(sandbox: Sandbox) -> None:
    """Bars: one element per bar, labelled by category and grouped by series."""
    code = (
        "import numpy as np\n"
        "plt.figure()\n"
        "x = np.arange(3)\n"
        "plt.bar(x - 0.2, [10, 20, 30], width=0.4, label='2023')\n"
        "plt.bar(x + 0.2, [15, 25, 35], width=0.4, label='2024')\n"
        "plt.xticks(x, ['A', 'B', 'C'])\n"
        "plt.xlabel('Shop'); plt.ylabel('Sales'); plt.title('Sales')"
    )
    chart = _chart(sandbox, code)
    assert isinstance(chart, BarChart)
    assert chart.title == "Sales"
    assert [(e.group, e.value) for e in chart.elements] == [
        ("2023", 10.0), ("2023", 20.0), ("2023", 30.0),
        ("2024", 15.0), ("2024", 25.0), ("2024", 35.0),
    ]  # fmt: skip


def test_categorical_bar_chart(sandbox: Sandbox) -> None:
    """Bars over string categories are labelled with the category names."""
    code = "plt.figure()\nplt.bar(['x', 'y'], [3, 4], label='n')\nplt.title('Cats')"
    chart = _chart(sandbox, code)
    assert isinstance(chart, BarChart)
    assert [(e.label, e.group, e.value) for e in chart.elements] == [
        ("x", "n", 3.0),
        ("y", "n", 4.0),
    ]
    # E2B's bar model has labels and units only; scales and ticks are for point charts.
    assert "x_scale" not in chart.to_dict() and chart.x_label is None


def test_pie_chart(sandbox: Sandbox) -> None:
    """Pie: each wedge's label, angle in degrees and radius."""
    code = "plt.figure()\nplt.pie([90, 10], labels=['No', 'Yes'])\nplt.title('Pie')"
    chart = _chart(sandbox, code)
    assert isinstance(chart, PieChart)
    assert chart.title == "Pie"
    assert [(e.label, e.angle, e.radius) for e in chart.elements] == [
        ("No", 324.0, 1.0),
        ("Yes", 36.0, 1.0),
    ]


def test_box_and_whisker_chart(sandbox: Sandbox) -> None:
    """Box plots: the statistics each box was drawn from, outliers included."""
    code = (
        "fig, ax = plt.subplots()\n"
        "ax.boxplot([[1, 2, 3, 4, 5, 40], [2, 3, 4]], tick_labels=['A', 'B'])\n"
        "ax.set_title('Spread'); ax.set_ylabel('Score')"
    )
    chart = _chart(sandbox, code)
    assert isinstance(chart, BoxAndWhiskerChart)
    assert chart.title == "Spread" and chart.y_label == "Score"
    first, second = chart.elements
    assert first.label == "A" and first.outliers == [40.0]
    assert (first.min, first.first_quartile, first.median, first.third_quartile, first.max) == (
        1.0, 2.25, 3.5, 4.75, 5.0,
    )  # fmt: skip
    assert (second.label, second.median, second.outliers) == ("B", 3.0, [])


def test_superchart_of_subplots(sandbox: Sandbox) -> None:
    """Several Axes make a superchart whose elements are the charts of each Axes."""
    code = (
        "fig, (a, b) = plt.subplots(1, 2)\n"
        "a.plot([1, 2], [3, 4]); a.set_title('left')\n"
        "b.pie([1, 1]); b.set_title('right')\n"
        "fig.suptitle('Both')"
    )
    chart = _chart(sandbox, code)
    assert isinstance(chart, SuperChart)
    assert chart.title == "Both"
    assert [(c.type, c.title) for c in chart.elements] == [
        (ChartType.LINE, "left"),
        (ChartType.PIE, "right"),
    ]


def test_figure_without_axes_content_is_unknown(sandbox: Sandbox) -> None:
    """An Axes with nothing recognisable is typed unknown, not dropped or guessed."""
    chart = _chart(sandbox, "fig, ax = plt.subplots()\nax.set_title('empty')")
    assert chart.type == ChartType.UNKNOWN
    assert chart.title == "empty"


def test_horizontal_bars_are_labelled_by_their_y_category(sandbox: Sandbox) -> None:
    """barh: each bar's label is its category on the y axis, its value the bar width."""
    code = "plt.figure()\nplt.barh(['slow', 'fast'], [7, 2], label='secs')\nplt.title('H')"
    chart = _chart(sandbox, code)
    assert isinstance(chart, BarChart)
    assert [(e.label, e.group, e.value) for e in chart.elements] == [
        ("slow", "secs", 7.0),
        ("fast", "secs", 2.0),
    ]


def test_lines_and_points_on_one_axes_make_a_superchart(sandbox: Sandbox) -> None:
    """A line and a scatter drawn on the same Axes come back as two charts."""
    code = (
        "plt.figure()\n"
        "plt.plot([0, 1], [0, 1], label='fit')\n"
        "plt.scatter([0, 1], [0.1, 0.9], label='obs')\n"
        "plt.title('Fit')"
    )
    chart = _chart(sandbox, code)
    assert isinstance(chart, SuperChart)
    line, scatter = chart.elements
    assert isinstance(line, LineChart) and isinstance(scatter, ScatterChart)
    assert line.elements[0].label == "fit"
    assert scatter.elements[0].points == [(0.0, 0.1), (1.0, 0.9)]
