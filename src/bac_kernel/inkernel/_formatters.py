"""The `e2b/data` and `e2b/chart` display formatters, registered on an IPython shell.

They pick objects by class name along the MRO instead of through IPython's type registry:
activating matplotlib's inline backend pops every formatter registered for `Figure`, and
naming classes keeps pandas and matplotlib unimported until user code imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from IPython.core.formatters import BaseFormatter

from bac_kernel._outputs import CHART_MIME, DATA_MIME
from bac_kernel.inkernel import _boxplot_hook, _image_show
from bac_kernel.inkernel._charts import figure_to_chart
from bac_kernel.inkernel._data import dataframe_to_data

Handler = Callable[[Any], dict[str, Any] | None]


class _ByClassName(BaseFormatter):
    """Formats objects whose class (or a base) is one of `handlers`' (module, name) keys."""

    _return_type = (dict,)
    handlers: dict[tuple[str, str], Handler]

    def __call__(self, obj: Any) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        for cls in type(obj).__mro__:
            handler = self.handlers.get((cls.__module__, cls.__name__))
            if handler is not None:
                return handler(obj)
        return None


def _formatter(display: Any, mime: str, handlers: dict[tuple[str, str], Handler]) -> None:
    formatter = _ByClassName(parent=display, format_type=mime)
    formatter.handlers = handlers
    display.formatters[mime] = formatter


def install(ipython: Any) -> None:
    display = ipython.display_formatter
    # pandas 3 reports DataFrame's module as "pandas"; earlier versions the defining module.
    frame: dict[tuple[str, str], Handler] = {("pandas", "DataFrame"): dataframe_to_data}
    frame[("pandas.core.frame", "DataFrame")] = dataframe_to_data
    _formatter(display, DATA_MIME, frame)
    _formatter(display, CHART_MIME, {("matplotlib.figure", "Figure"): figure_to_chart})
    _boxplot_hook.install()
    _image_show.install()
