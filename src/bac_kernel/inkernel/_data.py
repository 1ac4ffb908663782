"""pandas DataFrame → `{column: [values]}` (the shape of `DataFrame.to_dict("list")`).

Values go through pandas' own JSON writer, column by column, so timestamps become ISO
strings and NaN becomes null: the result is valid JSON whatever the dtypes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_loads: Callable[[str], Any] = json.loads
try:  # several times faster on large frames; optional
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - depends on what the sandbox image installed
    pass


def dataframe_to_data(frame: Any) -> dict[str, Any] | None:
    try:
        return {
            str(name): _loads(
                frame.iloc[:, index].to_json(
                    orient="values", date_format="iso", default_handler=str
                )
            )
            for index, name in enumerate(frame.columns)
        }
    except Exception:  # a display helper must never break the cell's output
        return None
