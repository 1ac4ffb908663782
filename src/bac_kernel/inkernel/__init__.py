"""Code that runs inside the Python kernel, loaded as an IPython extension at kernel start.

It adds two display formatters, so a cell's rich results carry structured data next to
the usual MIME types: pandas DataFrames as `e2b/data` (column → values) and matplotlib
figures as `e2b/chart` (chart type, axes, and the data points of each element). Nothing
here imports pandas or matplotlib: the formatters bind by type name, and box plots are
recorded by a hook that patches matplotlib only when the user's code imports it.
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """IPython's entry point (`--IPKernelApp.extensions=bac_kernel.inkernel`)."""
    from bac_kernel.inkernel._formatters import install

    install(ipython)
