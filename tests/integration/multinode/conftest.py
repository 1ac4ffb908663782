"""Several machines on this one (tests/multinode.py): node agents in network namespaces,
API replicas on the host, one PostgreSQL."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2b import Sandbox

sys.path.insert(0, str(Path(__file__).parents[2]))
sys.path.insert(0, str(Path(__file__).parents[2] / "compat"))

from multinode import Cluster, running_cluster
from postgres_cluster import Cluster as Postgres
from postgres_cluster import missing_reason
from postgres_cluster import running_cluster as running_postgres


@pytest.fixture(scope="package")
def postgres() -> Iterator[Postgres]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with running_postgres() as cluster:
        yield cluster


@pytest.fixture(scope="package")
def cluster(postgres: Postgres) -> Iterator[Cluster]:
    """Three nodes, two API replicas, one team's key (one set for the package: starting
    them is most of its time)."""
    with running_cluster(postgres.new_database("nodes")) as made:
        made.add_nodes(3)
        made.add_replicas(2, BAC_NODE_SWEEP_S="1", BAC_MIN_CHECKPOINT_INTERVAL_S="2",
                          BAC_METRICS_INTERVAL_S="1")
        made.create_key("multi")
        yield made


@pytest.fixture
def sandboxes(cluster: Cluster) -> Iterator[list[Sandbox]]:
    """Sandboxes a test made: killed after it, whatever became of them."""
    made: list[Sandbox] = []
    yield made
    for sbx in made:
        with contextlib.suppress(Exception):
            sbx.kill()
