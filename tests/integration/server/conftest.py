"""Fixtures for server integration tests (real sockets; sandboxes where a test needs them)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

# Harness modules live beside the tests and in tests/compat (the server process helper).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "compat"))

from api_limits import TEAM_LIMIT
from bac_process import ServerProcess, running


@pytest.fixture(scope="package")
def server() -> Iterator[ServerProcess]:
    """One real server for this directory's API tests (restart tests make their own)."""
    with running("server-tests", BAC_MAX_SANDBOXES_PER_TEAM=str(TEAM_LIMIT)) as srv:
        srv.create_key("alpha")
        srv.create_key("beta")
        yield srv


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    """An HTTP client for the API, authenticated as team alpha."""
    with httpx.Client(
        base_url=server.url, headers={"X-API-KEY": server.keys[0]}, timeout=60
    ) as client:
        yield client
