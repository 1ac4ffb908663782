"""The shared template root collected across machines (docs/scale-out.md, *Templates*):
``bac admin gc`` as an API replica (``BAC_ROLE=api``) asks every node what its sandboxes
and build steps mount, deletes what a deleted template alone used, and keeps what a
template in use still needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from e2b import Sandbox
from multinode import Cluster

from bac import ConnectionOpts, Template, Templates

# The template root's readings are the single-server collection tests' (gc_fixtures).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "templates"))
from gc_fixtures import build_in, layer_keys_in

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _layers_of(cluster: Cluster, digest: str) -> set[str]:
    return layer_keys_in(cluster.templates_dir, digest)


def _build(cluster: Cluster, line: str) -> tuple[str, str]:
    """A template of one RUN step, built through replica 0 (its step on a node)."""
    name = f"mn-gc-{uuid.uuid4().hex[:8]}"
    connection: ConnectionOpts = {"api_key": cluster.keys[0],
                                  "api_url": cluster.replicas[0].url}
    return name, build_in(cluster.templates_dir, connection,
                          Template("base").run(line, user="root"), name)


def _collect(cluster: Cluster) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAC_", "E2B_"))}
    env.update(cluster.shared_env(), BAC_ROLE="api",
               BAC_DATA_DIR=str(cluster.replicas[0].data_dir),
               BAC_TEMPLATES_DIR=str(cluster.templates_dir), BAC_GC_GRACE_S="0")
    done = subprocess.run([sys.executable, "-c", "from bac.cli import main; main()", "admin",
                           "gc", "--json"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_leader_collects_what_no_node_uses(cluster: Cluster,
                                               sandboxes: list[Sandbox]) -> None:
    kept_name, kept = _build(cluster, f"echo kept-{uuid.uuid4().hex} > /kept")
    gone_name, gone = _build(cluster, f"echo gone-{uuid.uuid4().hex} > /gone")
    in_use = Sandbox.create(kept_name, timeout=120, **cluster.opts())
    sandboxes.append(in_use)
    opts = {"api_key": cluster.keys[0], "api_url": cluster.replicas[1].url}
    with Templates(**opts) as templates:  # type: ignore[arg-type]
        assert templates.delete(gone_name)
    only_gone = _layers_of(cluster, gone) - _layers_of(cluster, kept)
    assert only_gone
    report = _collect(cluster)
    assert report["skipped"] is None, report
    deleted = {f["name"] for f in report["deleted"]}
    assert only_gone <= deleted
    assert not _layers_of(cluster, kept) & deleted
    layers = cluster.templates_dir / "layers"
    assert not any((layers / key).exists() for key in only_gone)
    # The template in use still starts, and its sandbox still has its files.
    assert in_use.commands.run("cat /kept").stdout.startswith("kept-")
    again = Sandbox.create(kept_name, timeout=60, **cluster.opts(1))
    sandboxes.append(again)
    assert again.commands.run("cat /kept").stdout.startswith("kept-")
