"""The SDK's version, as sent to the server in ``User-Agent``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bac")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

USER_AGENT = f"bac-python-sdk/{__version__}"
