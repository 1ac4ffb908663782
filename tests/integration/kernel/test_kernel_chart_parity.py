"""Chart payloads match E2B's chart model field for field: each figure is drawn in the
kernel (Bac's payload) and on the host through `e2b-charts`, E2B's own extraction."""

from __future__ import annotations

import json
import warnings
from typing import Any

import matplotlib
import pytest
from e2b_code_interpreter import Sandbox

matplotlib.use("agg")

FIGURES = {
    "line": (
        "plt.figure()\n"
        "plt.plot([1, 2, 3], [1, 4, 9], label='squares')\n"
        "plt.plot([1, 2, 3], [2, 3, 4])\n"
        "plt.title('Lines'); plt.xlabel('Time (s)'); plt.ylabel('Distance [m]')"
    ),
    "scatter": (
        "plt.figure()\n"
        "plt.scatter([1, 2, 3], [10, 100, 1000], label='pts')\n"
        "plt.yscale('log'); plt.title('Scatter')"
    ),
    "bar": (
        "plt.figure()\n"
        "plt.bar(['a', 'b', 'c'], [3, 4, 5], label='first')\n"
        "plt.bar(['a', 'b', 'c'], [1, 1, 2])\n"
        "plt.xlabel('Letter'); plt.ylabel('Count (n)'); plt.title('Bars')"
    ),
    "pie": "plt.figure()\nplt.pie([90, 10], labels=['No', 'Yes'])\nplt.title('Pie')",
    # E2B's own test figure (drawn once: e2b-charts counts the outliers of every draw).
    "box_and_whisker": (
        "data = {'Class A': [85, 90, 78, 92, 88], 'Class B': [95, 89, 76, 91, 84, 87],\n"
        "        'Class C': [75, 82, 88, 79, 86, 40]}\n"
        "fig, ax = plt.subplots(figsize=(10, 6))\n"
        "ax.boxplot(data.values(), tick_labels=data.keys(), patch_artist=True)\n"
        "ax.set_title('Exam Scores Distribution'); ax.set_xlabel('Class (group)')\n"
        "ax.set_ylabel('Score')"
    ),
    "superchart": (
        "fig, (a, b) = plt.subplots(1, 2)\n"
        "a.bar(['x', 'y'], [1, 2], label='g'); a.set_title('left')\n"
        "b.pie([1, 3], labels=['p', 'q']); b.set_title('right')\n"
        "fig.suptitle('Both')"
    ),
}


def _plain(value: Any) -> Any:
    """JSON-shaped, numbers as floats: e2b-charts returns numpy scalars."""
    return json.loads(json.dumps(value, default=float))


def _e2b_chart(code: str) -> dict[str, Any]:
    import matplotlib.pyplot as plt
    from e2b_charts import chart_figure_to_dict

    plt.close("all")
    exec(code, {"plt": plt})  # the test's own figure code
    figure = plt.gcf()
    figure.canvas.draw()  # tick labels exist once drawn, as in the kernel's PNG render
    with warnings.catch_warnings():
        # e2b-charts' pydantic models warn about the numpy scalars it stores.
        warnings.simplefilter("ignore")
        chart = chart_figure_to_dict(figure)
    plt.close("all")
    return dict(_plain(chart))


def _without_ticks(chart: dict[str, Any]) -> dict[str, Any]:
    """Tick positions and labels depend on the renderer's layout; compared separately."""
    chart = {k: v for k, v in chart.items() if not k.endswith(("_ticks", "_tick_labels"))}
    if chart.get("type") == "superchart":
        chart["elements"] = [_without_ticks(e) for e in chart["elements"]]
    return chart


@pytest.mark.parametrize("kind", list(FIGURES))
def test_chart_matches_e2b_chart_model(sandbox: Sandbox, kind: str) -> None:
    """Same figure, same chart: every key E2B's model has, with the same values."""
    code = "import matplotlib.pyplot as plt\n" + FIGURES[kind] + "\nplt.show()"
    execution = sandbox.run_code(code)
    assert execution.error is None, execution.error
    (result,) = execution.results
    assert result.chart is not None
    ours = _plain(result.chart.to_dict())
    theirs = _e2b_chart(FIGURES[kind])
    assert ours["type"] == theirs["type"] == kind
    assert _without_ticks(ours) == _without_ticks(theirs)
    assert set(ours) == set(theirs)  # no key E2B's model lacks, none missing


def test_box_plot_drawn_once_without_fill_is_a_box_chart(sandbox: Sandbox) -> None:
    """A plain `boxplot` (lines only) is still a box-and-whisker chart with its statistics
    (e2b-charts 1.0.0 mistakes it for a line chart; E2B's model is what is matched)."""
    code = (
        "import matplotlib.pyplot as plt\nplt.figure()\n"
        "plt.boxplot([[1, 2, 3, 4, 5, 40], [2, 3, 4]], tick_labels=['A', 'B'], vert=False)\n"
        "plt.xlabel('Score (pts)'); plt.ylabel('Group'); plt.show()"
    )
    (result,) = sandbox.run_code(code).results
    chart = result.chart.to_dict()
    assert chart["type"] == "box_and_whisker"
    # Horizontal: the category axis is reported as x, as E2B's model orients box charts.
    assert (chart["x_label"], chart["y_label"], chart["y_unit"]) == ("Group", "Score (pts)", "pts")
    assert [(e["label"], e["median"], e["outliers"]) for e in chart["elements"]] == [
        ("A", 3.5, [40.0]), ("B", 3.0, []),
    ]  # fmt: skip


def test_box_plot_drawn_twice_has_one_element_per_box(sandbox: Sandbox) -> None:
    """Drawing the same boxes again (to restyle them) gives each box once, its outliers
    once (e2b-charts 1.0.0 counts them twice)."""
    code = (
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
        "ax.boxplot([[1, 2, 3, 4, 5, 40], [2, 3, 4]], tick_labels=['A', 'B'])\n"
        "ax.boxplot([[1, 2, 3, 4, 5, 40], [2, 3, 4]], tick_labels=['A', 'B'], patch_artist=True)\n"
        "plt.show()"
    )
    (result,) = sandbox.run_code(code).results
    elements = result.chart.to_dict()["elements"]
    assert [(e["label"], e["outliers"]) for e in elements] == [("A", [40.0]), ("B", [])]
