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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """Once the run leaves a directory, the session-wide fixtures its conftest.py defines
    (a server with its pool, a backend) are finished then, not at the session's end.

    Pytest scopes them to the session (its ``package`` scope needs ``__init__.py``
    packages, which these directories are not): every test server of the run would stay
    up until the last test, each sampling its sandboxes and refilling its pool on the
    two cores the later tests share. A later test that asks for one again gets a new one.
    """
    result = yield
    staying = set(nextitem.iter_parents()) if nextitem is not None else set()
    manager = item.session._fixturemanager  # no public way to list the definitions
    for fixturedef in manager._get_all_fixture_defs_for_node(item):
        where = fixturedef.node
        if (fixturedef.scope == "session" and isinstance(where, pytest.Directory)
                and fixturedef.cached_result is not None and where not in staying):
            fixturedef.finish(item._request)  # type: ignore[attr-defined]
    return result
