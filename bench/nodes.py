"""What the API → node hop costs, and creates per second over 1, 2 and 3 nodes.

Everything on this machine and one PostgreSQL (tests/postgres_cluster.py): a node is a
network namespace with its agent (tests/multinode.py), the API replica runs on the host.
Measured with the official e2b SDK:

* the hop: an all-in-one server on the same database (the floor, same run) against an API
  replica over one node, interleaved (the order swapped every round, a pause after each
  create for its pool to refill): ``Sandbox.create()`` → first ``echo`` (each from a
  warm pool), and ``commands.run("true")`` on a live sandbox (through the replica's
  gateway, the node's tunnel, the sandbox; the tunnel's connection is kept alive);
* creates per second: a burst of ``--burst`` creates at once (threads) against a replica
  over 1, 2 and 3 nodes (each node's pool ``--pool``); the cores are shared by every node,
  so this shows the placement's and the hop's overhead, not more machines' capacity.

    sudo .venv/bin/python bench/nodes.py [-n 30] [--round-trips 200] [--burst 24]

Issue 20's target: the hop adds ≤ 2 ms p50 to a create and to a command round trip.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat"), str(ROOT / "bench")]

from _stats import pct  # noqa: E402
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir  # noqa: E402
from e2b import Sandbox  # noqa: E402
from multinode import Cluster, running_cluster  # noqa: E402
from postgres_cluster import running_cluster as running_postgres  # noqa: E402


def _opts(url: str, key: str) -> dict[str, str]:
    return {"api_key": key, "api_url": url, "sandbox_url": url}


@contextlib.contextmanager
def _one_server(database_url: str, key_file: Path, pool: int) -> Iterator[ServerProcess]:
    server = ServerProcess(fresh_data_dir("bench-all"), extra_env={
        "BAC_DATABASE_URL": database_url, "BAC_STORE_KEY_FILE": str(key_file),
        # Made the way a node makes them (a replica takes no start snapshots yet: both
        # hand out from the pool).
        "BAC_POOL_SIZE": str(pool), "BAC_START_SNAPSHOTS": "false",
        "BAC_MAX_SANDBOXES_PER_TEAM": "500"})
    server.start()
    try:
        yield server
    finally:
        server.stop()
        remove_data_dir(server)


def _line(label: str, values: list[float]) -> str:
    return (f"  {label:<44} p50 {pct(values, 0.5) * 1000:7.2f} ms  "
            f"p99 {pct(values, 0.99) * 1000:7.2f} ms  (n={len(values)})")


def _create_first_output(opts: dict[str, str]) -> float:
    began = time.perf_counter()
    sbx = Sandbox.create(timeout=60, **opts)
    sbx.commands.run("echo ready")
    took = time.perf_counter() - began
    sbx.kill()
    return took


def _round_trips(opts: dict[str, str], n: int) -> Callable[[], float]:
    sbx = Sandbox.create(timeout=600, **opts)
    sbx.commands.run("true")

    def one() -> float:
        began = time.perf_counter()
        sbx.commands.run("true")
        return time.perf_counter() - began

    one.sandbox = sbx  # type: ignore[attr-defined]
    return one


def hop(cluster: Cluster, server: ServerProcess, key: str, n: int, trips: int) -> None:
    direct = _opts(server.url, key)
    remote = _opts(cluster.replicas[0].url, key)
    creates: dict[str, list[float]] = {"one server": [], "replica + node": []}
    sides = [("one server", direct), ("replica + node", remote)]
    for round_ in range(n):
        # Each create followed by a pause (its pool refills, its kill ends, alone), and
        # the order swapped every round: neither side is measured while the other's
        # refill runs on the shared cores.
        for name, opts in sides if round_ % 2 == 0 else sides[::-1]:
            creates[name].append(_create_first_output(opts))
            time.sleep(0.3)
    runs = {"one server": _round_trips(direct, trips),
            "replica + node": _round_trips(remote, trips)}
    trip_times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(trips):
        for name, one in runs.items():
            trip_times[name].append(one())
    for one in runs.values():
        one.sandbox.kill()  # type: ignore[attr-defined]
    print("create → first output (from a warm pool):")
    for name, values in creates.items():
        print(_line(name, values))
    added = statistics.median(creates["replica + node"]) - statistics.median(
        creates["one server"])
    print(f"  added by the hop, p50: {added * 1000:.2f} ms")
    print('commands.run("true"):')
    for name, values in trip_times.items():
        print(_line(name, values))
    added = statistics.median(trip_times["replica + node"]) - statistics.median(
        trip_times["one server"])
    print(f"  added by the hop, p50: {added * 1000:.2f} ms")


def burst(cluster: Cluster, key: str, size: int) -> float:
    opts = _opts(cluster.replicas[0].url, key)
    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(size) as pool:
        made = list(pool.map(lambda _: Sandbox.create(timeout=120, **opts), range(size)))
    took = time.perf_counter() - began
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda s: s.kill(), made))
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=30, help="creates measured on each side")
    parser.add_argument("--round-trips", type=int, default=200)
    parser.add_argument("--burst", type=int, default=24)
    parser.add_argument("--pool", type=int, default=2, help="warm pool of each node")
    args = parser.parse_args()
    with running_postgres() as postgres:
        with running_cluster(postgres.new_database("bench")) as cluster:
            cluster.add_node(BAC_POOL_SIZE=str(args.pool))
            cluster.add_replica(BAC_MAX_SANDBOXES_PER_TEAM="500")
            key = cluster.create_key("bench")
            with _one_server(cluster.database_url, cluster.key_file, args.pool) as server:
                hop(cluster, server, key, args.n, args.round_trips)
            print(f"a burst of {args.burst} creates at once:")
            for nodes in (1, 2, 3):
                while len(cluster.nodes) < nodes:
                    cluster.add_node(BAC_POOL_SIZE=str(args.pool))
                time.sleep(2.0)  # the new node's pool fills
                took = burst(cluster, key, args.burst)
                print(f"  {nodes} node(s): {took:6.2f} s, {args.burst / took:5.1f} creates/s")


if __name__ == "__main__":
    main()
