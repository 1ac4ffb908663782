"""Fixtures for the CLI's end-to-end tests: the same real server the SDK tests use."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The server harness lives with the SDK's integration tests; share it, don't copy it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))

from cli_runs import bac_cli
from sdk_server import BacServer, running_server


@pytest.fixture(scope="session")
def bac_server() -> Iterator[BacServer]:
    """A real Bac server with real sandboxes (needs root and a prepared machine)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: sandboxes need namespaces, cgroups and mounts")
    with running_server() as server:
        yield server


@pytest.fixture
def cli_env(bac_server: BacServer) -> dict[str, str]:
    """Environment for CLI invocations: where the server is and the team's key."""
    return {"BAC_API_URL": bac_server.url, "BAC_API_KEY": bac_server.api_key}


@pytest.fixture
def sandbox_id(cli_env: dict[str, str]) -> Iterator[str]:
    """A sandbox made with `bac sandbox create`, killed after the test."""
    created = bac_cli(cli_env, "sandbox", "create", "--timeout", "180", "--json")
    assert created.exit_code == 0, created.output
    sid = json.loads(created.stdout)["sandboxId"]
    yield sid
    bac_cli(cli_env, "sandbox", "kill", sid)
