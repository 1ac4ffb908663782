"""Suite-wide pytest configuration.

Sandboxes need root (namespaces, cgroups, mounts). Tests marked ``root`` are skipped,
with the reason, only when the suite really runs without root; CI runs as root.
Shared fixtures live in the conftest.py of the directory that needs them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The test machine's root ~/.bashrc runs ``pyenv init``, whose rehash takes a lock file
# and removes it when it ends; a root shell the tests start on the machine (the host
# envd's login shells, a bash kernel) killed while it reads its rc leaves the lock, and
# every later root login shell of the machine then waits a minute for it. Not the
# product's (sandboxes have a root of their own), but it fails whatever runs after it.
_PYENV_LOCK = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "shims" / \
    ".pyenv-shim"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root: namespaces, cgroups and mounts are unavailable")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


def _rehash_running() -> bool:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                    if b"pyenv-rehash" in cmdline.read():
                        return True
            except OSError:
                continue
    return False


@pytest.fixture(autouse=True)
def _no_stale_pyenv_lock() -> None:
    """Before each test, a pyenv rehash lock that no running rehash holds goes (above)."""
    if _PYENV_LOCK.exists() and not _rehash_running():
        _PYENV_LOCK.unlink(missing_ok=True)
