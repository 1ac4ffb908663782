"""Paused sandboxes move (docs/scale-out.md, *Paused sandboxes move*): a node exports each
suspended sandbox's state to the storage every node shares; when that node is lost, a
resume through any replica runs the sandbox on another node with its files, processes and
memory; the lost node, once back, loses its stale copy. A resume on the sandbox's own node
or its end retires the export, so no node can take over an older state."""

from __future__ import annotations

import httpx
import pytest
from e2b import Sandbox
from multinode import Cluster, until, wait_health

pytestmark = pytest.mark.root


def _on(cluster: Cluster, sandboxes: list[Sandbox], node_id: str) -> Sandbox:
    """A new sandbox placed on ``node_id`` (placement spreads: a few creates find it)."""
    for _ in range(12):
        made = Sandbox.create(timeout=300, **cluster.opts())
        sandboxes.append(made)
        if cluster.placements()[made.sandbox_id] == node_id:
            return made
    raise AssertionError(f"no create went to {node_id}")


def test_a_resume_or_a_kill_on_its_own_node_retires_the_export(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    sbx = Sandbox.create(timeout=300, **cluster.opts())
    sandboxes.append(sbx)
    sbx.commands.run("echo one > /home/user/state")
    sbx.beta_pause()
    until("the export is complete", lambda: len(cluster.exports(sbx.sandbox_id)) == 1)
    back = Sandbox.connect(sbx.sandbox_id, **cluster.opts())
    # Retired before the wake returned: no node can take over the state it had paused.
    assert cluster.exports(sbx.sandbox_id) == []
    back.commands.run("echo two > /home/user/state")
    back.beta_pause()
    until("the second export is complete",
           lambda: len(cluster.exports(sbx.sandbox_id)) == 1)
    back.kill()
    assert cluster.exports(sbx.sandbox_id) == []


def test_a_paused_sandbox_resumes_on_another_node_when_its_own_is_lost(
        cluster: Cluster, sandboxes: list[Sandbox], request: pytest.FixtureRequest) -> None:
    sbx = _on(cluster, sandboxes, "node-2")
    sbx.commands.run("echo kept > /home/user/state")
    sleeper = sbx.commands.run("sleep 3600", background=True)
    sbx.beta_pause()
    until("the export is complete", lambda: len(cluster.exports(sbx.sandbox_id)) == 1)
    node = cluster.nodes[1]
    node.kill9()
    api = httpx.Client(base_url=cluster.replicas[1].url,
                       headers={"X-API-KEY": cluster.keys[0]}, timeout=30)
    request.addfinalizer(api.close)
    lost = wait_health(api, sbx.sandbox_id, "lost")
    assert lost["state"] == "paused"

    # Resumed through the other replica: on another node, with its files, its processes
    # and their memory (the sleep started before the pause still runs, same pid).
    moved = Sandbox.connect(sbx.sandbox_id, **cluster.opts(1))
    assert cluster.placements()[sbx.sandbox_id] not in ("node-2", None)
    assert moved.commands.run("cat /home/user/state").stdout == "kept\n"
    assert moved.commands.run(f"tr '\\0' ' ' < /proc/{sleeper.pid}/cmdline").stdout \
        == "sleep 3600 "
    assert moved.commands.run("hostname").stdout.strip() == sbx.sandbox_id
    assert cluster.exports(sbx.sandbox_id) == []  # taken: nobody takes it again
    wait_health(api, sbx.sandbox_id, "healthy")
    until("the replica that moved it wrote why it is healthy", lambda: [
        e["fields"].get("reason") for e in api.get(
            f"/sandboxes/{sbx.sandbox_id}/trace", params={"kind": "healthy"}).json()["events"]
    ] == ["node_moved"])

    # The node back: its stale copy goes, the moved sandbox stays.
    node.start()
    until("the stale copy is destroyed",
           lambda: not (node.data_dir / "claims" / sbx.sandbox_id).exists())
    assert moved.commands.run("echo still").stdout == "still\n"
    wait_health(api, sbx.sandbox_id, "healthy")
