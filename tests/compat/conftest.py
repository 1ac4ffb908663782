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
    nodes = int(os.environ.get("BAC_TEST_NODES", "0"))
    if nodes:
        # The same tests against an API replica over node agents (docs/scale-out.md).
        yield from _over_nodes(nodes)
        return
    with running("compat") as srv:
        srv.create_key("compat")
        srv.create_key("compat-other")
        yield srv


def _over_nodes(nodes: int) -> Iterator[ServerProcess]:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from multinode import BUILTINS, running_cluster
    from postgres_cluster import running_cluster as running_postgres

    with running_postgres() as postgres, \
            running_cluster(postgres.new_database("compat"), BUILTINS) as cluster:
        for _ in range(nodes):
            cluster.add_node()
        replica = cluster.add_replica()
        saved = {k: os.environ.get(k) for k in cluster.shared_env()}
        os.environ.update(cluster.shared_env())  # where `bac keys` finds the store
        try:
            replica.create_key("compat")
            replica.create_key("compat-other")
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        cluster.keys = replica.keys
        yield replica


@pytest.fixture
def backend_dir(server: ServerProcess) -> Path:
    """The data dir of the backend holding the server's sandboxes, for the tests that
    reach into it (a slot's files, a checkpoint's images): one machine's only."""
    if os.environ.get("BAC_TEST_NODES"):
        pytest.skip("reaches into the backend's own files, which are on a node's machine")
    return server.data_dir


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
