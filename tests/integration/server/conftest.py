"""Fixtures for server integration tests (real sockets; sandboxes where a test needs them)."""

from __future__ import annotations

import sys
from pathlib import Path

# The harness modules live beside the tests; make them importable without a package.
sys.path.insert(0, str(Path(__file__).parent))
