"""The reliability suite: load, crash and abuse against real servers and sandboxes.

Each test has a short form, run by CI, and a long form with the issue's full figures,
run on request: ``BAC_RELIABILITY=long .venv/bin/pytest tests/reliability``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "backend"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backend_fixtures import backend, backend_factory, data_dir, make_sandbox, template

__all__ = ["backend", "backend_factory", "data_dir", "make_sandbox", "template"]
