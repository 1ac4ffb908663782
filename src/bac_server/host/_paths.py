"""Where Bac keeps its state on the host, and which host ids sandboxes map to.

Both the template builder (which shifts file ownership once) and the namespace backend
(which maps container ids onto the same host range) read these, so they live here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DATA_DIR = Path("/var/lib/bac")


def default_data_dir() -> Path:
    """``$BAC_DATA_DIR`` or ``/var/lib/bac``."""
    raw = os.environ.get("BAC_DATA_DIR")
    return Path(raw) if raw else DEFAULT_DATA_DIR


@dataclass(frozen=True)
class IdRange:
    """Host uids/gids that container ids 0..size-1 map to (the same range for both)."""

    base: int = 100_000
    size: int = 65_536

    def __post_init__(self) -> None:
        # SECURITY: container root must never be host root, and the range must not wrap.
        if self.base < 1 or self.size < 1 or self.base + self.size > 2**32 - 1:
            raise ValueError(f"invalid id range base={self.base} size={self.size}")
        if self.size < 1001:
            raise ValueError("the id range must cover uid 1000 (the template's user)")

    @property
    def root(self) -> int:
        """The host id that container root (0) maps to."""
        return self.base
