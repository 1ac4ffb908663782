"""Fixtures for the agent fronts' tests (MCP, framework adapters, examples): one real Bac
server for the directory, with real sandboxes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The server harness lives with the SDK's integration tests; share it, don't copy it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))

from sdk_server import BacServer, running_server


@pytest.fixture(scope="session")
def bac_server() -> Iterator[BacServer]:
    """A real Bac server with real sandboxes (needs root and a prepared machine)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: sandboxes need namespaces, cgroups and mounts")
    with running_server() as server:
        yield server


@pytest.fixture
def client_env(bac_server: BacServer) -> dict[str, str]:
    """What a user puts in an MCP client's or an agent's environment: the server and key,
    and nothing of the test run's own BAC_/E2B_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAC_", "E2B_"))}
    return env | {"BAC_API_URL": bac_server.url, "BAC_API_KEY": bac_server.api_key}
