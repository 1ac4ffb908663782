"""Escape attempts against real namespace sandboxes. Each test tries the escape and fails
if it works. Commands run inside through envd (the official e2b SDK, debug mode)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "backend"))

from backend_fixtures import backend, backend_factory, data_dir, make_sandbox, template

__all__ = ["backend", "backend_factory", "data_dir", "make_sandbox", "template"]
