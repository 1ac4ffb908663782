"""Template storage collection on a real server (``bac admin gc`` over its data dir): what a
deleted template leaves goes, and nothing a sandbox, a snapshot or a running build still
needs is touched."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from gc_fixtures import (
    ServerProcess,
    build,
    collect,
    delete,
    deleted,
    layer_keys,
    layers,
    manifests,
    opts,
    srv,
)

from bac import Sandbox, Template

pytestmark = [pytest.mark.root, pytest.mark.slow]
__all__ = ["srv"]


def _run(command: str) -> Template:
    return Template("base").run(command, user="root")


def test_deleting_one_of_two_templates_frees_only_its_own_layers(srv: ServerProcess) -> None:
    """Two templates over one shared RUN layer: after one is deleted, a dry run lists its
    manifest and its own layers and deletes nothing; the collection then deletes exactly
    what the dry run listed; the shared layer and the other template's stay, and a sandbox
    still starts from it."""
    shared = f"echo shared-{uuid.uuid4().hex} > /shared"
    gone_name, gone = build(srv, _run(shared).run("echo a > /a", user="root"), "a")
    kept_name, kept = build(srv, _run(shared).run("echo b > /b", user="root"), "b")
    gone_layers, kept_layers = layer_keys(srv, gone), layer_keys(srv, kept)
    assert gone_layers & kept_layers and gone_layers - kept_layers
    delete(srv, gone_name)

    on_disk = layers(srv)
    dry = collect(srv, "--dry-run")
    assert dry["dryRun"] and dry["skipped"] is None
    assert gone in deleted(dry, "manifest") and kept not in deleted(dry, "manifest")
    assert gone_layers - kept_layers <= deleted(dry, "layer")
    assert not kept_layers & deleted(dry, "layer")
    assert layers(srv) == on_disk and gone in manifests(srv)

    report = collect(srv)
    assert {(f["kind"], f["name"]) for f in report["deleted"]} == {
        (f["kind"], f["name"]) for f in dry["deleted"]}
    assert report["freedBytes"] > 0
    assert gone not in manifests(srv) and kept in manifests(srv)
    assert not (gone_layers - kept_layers) & layers(srv)
    assert kept_layers <= layers(srv)
    with Sandbox.create(kept_name, timeout=60, **opts(srv)) as sbx:
        assert sbx.commands.run("cat /shared /b").stdout.splitlines()[1] == "b"


def test_a_sandbox_of_a_deleted_template_keeps_its_layers_until_killed(
        srv: ServerProcess) -> None:
    """A sandbox whose template is deleted keeps running, pauses and resumes on the same
    files through collections; once it is killed, the next collection deletes the
    template's manifest and layers."""
    marker = f"pinned-{uuid.uuid4().hex}"
    template_name, digest = build(srv, _run(f"echo {marker} > /marker"), "pinned")
    own = layer_keys(srv, digest)
    with Sandbox.create(template_name, timeout=300, **opts(srv)) as sbx:  # killed, closed
        delete(srv, template_name)
        first = collect(srv)
        assert digest not in deleted(first, "manifest") and not own & deleted(first, "layer")
        sbx.pause()
        paused = collect(srv)
        assert digest not in deleted(paused, "manifest") and not own & deleted(paused, "layer")
        assert own <= layers(srv)
        with contextlib.closing(Sandbox.connect(sbx.sandbox_id, **opts(srv))) as resumed:
            assert resumed.commands.run("cat /marker").stdout.strip() == marker
    after = collect(srv)
    assert digest in deleted(after, "manifest")
    assert own <= deleted(after, "layer") and not own & layers(srv)


def test_a_snapshot_keeps_the_layers_it_starts_from(srv: ServerProcess) -> None:
    """A snapshot of a sandbox whose template is deleted and which is then killed keeps
    the template's layers: a new sandbox starts from it and reads the template's file;
    after the snapshot is deleted, the next collection deletes them."""
    marker = f"snap-{uuid.uuid4().hex}"
    template_name, digest = build(srv, _run(f"echo {marker} > /marker"), "snap")
    own = layer_keys(srv, digest)
    with Sandbox.create(template_name, timeout=120, **opts(srv)) as sbx:
        snapshot = sbx.create_snapshot()
    delete(srv, template_name)
    kept = collect(srv)
    assert digest not in deleted(kept, "manifest") and not own & deleted(kept, "layer")
    try:
        with Sandbox.create(snapshot.snapshot_id, timeout=60, **opts(srv)) as copy:
            assert copy.commands.run("cat /marker").stdout.strip() == marker
    finally:
        assert Sandbox.delete_snapshot(snapshot.snapshot_id, **opts(srv))
    after = collect(srv)
    assert own <= deleted(after, "layer") and not own & layers(srv)
