"""What moving a paused sandbox to another node costs (docs/scale-out.md, *Paused
sandboxes move*): the export a node writes after each suspend, and a resume on another
node (its own lost) against a resume on its own node, the floor, in the same run.

Everything on this machine (tests/multinode.py): two nodes in network namespaces sharing
one directory as their handover storage, one API replica, one PostgreSQL. Each sandbox
first holds ``--memory-mb`` of random bytes in a process (what its suspend must save).
Measured with the official e2b SDK:

* pause (``beta_pause``: a suspend with memory) and the export after it (from the
  pause's return until the export is complete on the shared storage, polled every 5 ms);
* resume on its own node (``Sandbox.connect``), then: node 1 killed, the same resume of
  node 1's paused sandboxes, now taken over by node 2.

    sudo .venv/bin/python bench/handover.py [-n 10] [--memory-mb 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat"), str(ROOT / "bench")]

from _stats import pct  # noqa: E402
from e2b import Sandbox  # noqa: E402
from multinode import Cluster, running_cluster, wait_health  # noqa: E402
from postgres_cluster import running_cluster as running_postgres  # noqa: E402


def _line(label: str, values: list[float]) -> str:
    return (f"  {label:<40} p50 {pct(values, 0.5) * 1000:8.1f} ms  "
            f"p99 {pct(values, 0.99) * 1000:8.1f} ms  (n={len(values)})")


def _pause(cluster: Cluster, sbx: Sandbox, pauses: list[float],
           exports: list[float]) -> None:
    began = time.perf_counter()
    sbx.beta_pause()
    paused = time.perf_counter()
    pauses.append(paused - began)
    while not cluster.exports(sbx.sandbox_id):
        time.sleep(0.005)
    exports.append(time.perf_counter() - paused)


def _resume(cluster: Cluster, sbx: Sandbox, took: list[float]) -> Sandbox:
    began = time.perf_counter()
    back = Sandbox.connect(sbx.sandbox_id, **cluster.opts())
    took.append(time.perf_counter() - began)
    return back


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=10, help="sandboxes on each node")
    parser.add_argument("--memory-mb", type=int, default=64)
    args = parser.parse_args()
    hold = (f"python3 -c 'import os, time; b = os.urandom({args.memory_mb} << 20); "
            "time.sleep(1e6)'")
    with running_postgres() as postgres, \
            running_cluster(postgres.new_database("bench")) as cluster:
        for _ in range(2):
            cluster.add_node()
        cluster.add_replica(BAC_MAX_SANDBOXES_PER_TEAM="500")
        cluster.create_key("bench")
        on: dict[str, list[Sandbox]] = {"node-1": [], "node-2": []}
        made: list[Sandbox] = []
        try:
            while min(len(v) for v in on.values()) < args.n:
                sbx = Sandbox.create(timeout=600, **cluster.opts())
                made.append(sbx)
                node = cluster.placements()[sbx.sandbox_id]
                if len(on[node]) < args.n:
                    sbx.commands.run(hold, background=True)
                    on[node].append(sbx)
            for sbx in made:  # the memory is held by then
                sbx.commands.run("true")
            pauses: list[float] = []
            exports: list[float] = []
            own: list[float] = []
            for sbx in on["node-2"]:
                _pause(cluster, sbx, pauses, exports)
                _resume(cluster, sbx, own)
            for sbx in on["node-1"]:
                _pause(cluster, sbx, pauses, exports)
            cluster.nodes[0].kill9()
            with httpx.Client(base_url=cluster.replicas[0].url,
                              headers={"X-API-KEY": cluster.keys[0]}, timeout=30) as api:
                for sbx in on["node-1"]:
                    wait_health(api, sbx.sandbox_id, "lost")
            other: list[float] = []
            for sbx in on["node-1"]:
                back = _resume(cluster, sbx, other)
                assert back.commands.run("true").exit_code == 0
            assert all(cluster.placements()[s.sandbox_id] == "node-2" for s in on["node-1"])
            print(f"a sandbox holding {args.memory_mb} MiB in a process, {args.n} per node:")
            print(_line("pause (suspend with memory)", pauses))
            print(_line("export after it (background)", exports))
            print(_line("resume on its own node (floor)", own))
            print(_line("resume on another node (take-over)", other))
            print(f"  take-over / own node, p50: "
                  f"{pct(other, 0.5) / pct(own, 0.5):.1f}x")
            # Node 1 back: its stale copies go (the replica destroys them).
            node = cluster.nodes[0]
            node.start()
            claims = node.data_dir / "claims"
            deadline = time.monotonic() + 60
            while any((claims / s.sandbox_id).exists() for s in on["node-1"]):
                if time.monotonic() > deadline:
                    raise SystemExit("node 1 kept its stale copies")
                time.sleep(0.05)
        finally:
            for sbx in made:
                try:
                    sbx.kill()
                except Exception as exc:
                    print(f"killing {sbx.sandbox_id}: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()
