"""Suite-wide pytest configuration.

Sandboxes need root (namespaces, cgroups, mounts). Tests marked ``root`` are skipped,
with the reason, only when the suite really runs without root; CI runs as root.
Shared fixtures live in the conftest.py of the directory that needs them.
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root: namespaces, cgroups and mounts are unavailable")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
