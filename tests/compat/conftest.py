"""The official e2b SDK (2.63.0) against a real Bac server: shared server and sandbox fixtures.

One server for the whole directory; each test makes its own sandboxes. The SDK is pointed at
the server only through the environment, exactly as a user would do it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bac_process import ServerProcess, running

E2B_VERSION = "2.63.0"


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    from importlib.metadata import version

    assert version("e2b") == E2B_VERSION, "these tests pin the official SDK version"
    with running("compat") as srv:
        srv.create_key("compat")
        srv.create_key("compat-other")
        yield srv


@pytest.fixture(scope="module", autouse=True)
def e2b_env(server: ServerProcess) -> Iterator[None]:
    """Point the SDK at the server the way users do: environment variables only.

    Module-scoped so the variables are gone again before other test directories run:
    Bac's own SDK honours E2B_SANDBOX_URL too, and would send their traffic here."""
    saved = {k: os.environ.get(k) for k in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY")}
    os.environ["E2B_API_URL"] = server.url
    os.environ["E2B_SANDBOX_URL"] = server.url
    os.environ["E2B_API_KEY"] = server.keys[0]
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def sbx() -> Iterator[object]:
    from e2b import Sandbox

    sandbox = Sandbox.create(timeout=120)
    yield sandbox
    sandbox.kill()
