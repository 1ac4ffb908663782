"""Placement under contention: two API replicas creating at once on two small nodes (room
for three sandboxes each) never overfill one: exactly six creates succeed, the others
fail with a clear error, each node holds three, and no sandbox is left on a node that no
placement claims (a guessed node that filled up meanwhile gives its sandbox back)."""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Iterator

import httpx
import pytest
from e2b import Sandbox
from e2b.exceptions import ServiceBusyException
from multinode import RPC_PORT, Cluster, running_cluster
from postgres_cluster import Cluster as Postgres

pytestmark = pytest.mark.root

MEMORY_MB = 512
ROOM = 3


@pytest.fixture(scope="module")
def small(postgres: Postgres) -> Iterator[Cluster]:
    with running_cluster(postgres.new_database("placement")) as made:
        made.add_nodes(2, BAC_NODE_MEMORY_MB=str(MEMORY_MB * ROOM), BAC_POOL_SIZE="0")
        made.add_replicas(2, BAC_DEFAULT_MEMORY_MB=str(MEMORY_MB))
        made.create_key("placement")
        yield made


def _create(cluster: Cluster, replica: int) -> Sandbox | Exception:
    url = cluster.replicas[replica].url
    try:
        return Sandbox.create(timeout=120, api_key=cluster.keys[0], api_url=url,
                              sandbox_url=url)
    except ServiceBusyException as exc:  # 503: no node has room (worth a retry later)
        return exc


def test_two_replicas_at_once_never_overfill_a_node(small: Cluster) -> None:
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda n: _create(small, n % 2), range(10)))
    made = [r for r in results if isinstance(r, Sandbox)]
    refused = [r for r in results if not isinstance(r, Sandbox)]
    try:
        assert len(made) == 2 * ROOM, refused
        assert all("no node can take the sandbox" in str(r) for r in refused), refused
        headers = {"authorization": f"Bearer {small.token}"}
        held = {}
        for node in small.nodes:
            held[node.index] = set(httpx.get(
                f"http://{node.address}:{RPC_PORT}/v1/sandboxes", headers=headers,
                timeout=10).json())
        assert collections.Counter(len(ids) for ids in held.values()) == {ROOM: 2}
        assert set().union(*held.values()) == {s.sandbox_id for s in made}
        for sbx in made:
            assert sbx.commands.run("echo placed").stdout == "placed\n"
    finally:
        for sbx in made:
            sbx.kill()
