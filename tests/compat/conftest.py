"""The official e2b SDK (2.63.0) against a real Bac server: shared server and sandbox fixtures.

One server for the whole directory; each test makes its own sandboxes. The SDK is pointed at
the server only through the environment, exactly as a user would do it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bac_process import ServerProcess, running

E2B_VERSION = "2.63.0"


@dataclass
class Deployment:
    """The server the SDK talks to, the URL its sandbox traffic goes to (the same server,
    or over nodes with ``BAC_TEST_REPLICAS=2`` another replica), and the data dirs of the
    backends that hold its sandboxes: the server's own, or every node agent's."""

    server: ServerProcess
    backend_dirs: list[Path]
    sandbox_url: str


@pytest.fixture(scope="session")
def deployment() -> Iterator[Deployment]:
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
        yield Deployment(srv, [srv.data_dir], srv.url)


@pytest.fixture(scope="session")
def server(deployment: Deployment) -> ServerProcess:
    return deployment.server


def _over_nodes(nodes: int) -> Iterator[Deployment]:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from multinode import BUILTINS, running_cluster
    from postgres_cluster import running_cluster as running_postgres

    with running_postgres() as postgres, \
            running_cluster(postgres.new_database("compat"), BUILTINS) as cluster:
        held = cluster.add_nodes(nodes)
        # With two, the second replica takes the sandboxes' traffic (envd, ports) of
        # sandboxes made through the first: any replica answers any call.
        replicas = cluster.add_replicas(int(os.environ.get("BAC_TEST_REPLICAS", "1") == "2") + 1)
        replica, gateway = replicas[0], replicas[-1]
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
        yield Deployment(replica, [node.data_dir for node in held], gateway.url)


@pytest.fixture
def slot_dir(deployment: Deployment) -> Callable[[str], Path]:
    """The directory of a sandbox's slot on the machine that holds it, for the tests that
    reach into it from outside (its disk image, its suspended images, its state): the
    server's data dir on one machine, the data dir of the node that made it over nodes."""

    def find(sandbox_id: str) -> Path:
        for data_dir in deployment.backend_dirs:
            claim = data_dir / "claims" / sandbox_id
            if claim.exists():
                return data_dir / "sandboxes" / claim.read_text().strip()
        raise AssertionError(f"no backend holds a slot for {sandbox_id}")

    return find


@pytest.fixture(scope="module", autouse=True)
def e2b_env(deployment: Deployment) -> Iterator[None]:
    """Point the SDK at the server the way users do: environment variables only.

    Module-scoped so the variables are gone again before other test directories run:
    Bac's own SDK honours E2B_SANDBOX_URL too, and would send their traffic here."""
    saved = {k: os.environ.get(k) for k in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY")}
    os.environ["E2B_API_URL"] = deployment.server.url
    os.environ["E2B_SANDBOX_URL"] = deployment.sandbox_url
    os.environ["E2B_API_KEY"] = deployment.server.keys[0]
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
