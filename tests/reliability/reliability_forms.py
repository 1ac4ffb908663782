"""Which form of the reliability suite runs: the short one (CI) unless
``BAC_RELIABILITY=long`` asks for the full figures; holds no tests."""

from __future__ import annotations

import os

LONG = os.environ.get("BAC_RELIABILITY") == "long"
