"""The template storage collector on a template root of its own: layers published by the
layer store and manifests written as builds write them, then collected. Covers what the
server tests cannot time: the quarantine, data dirs sharing a root, links out of the root,
built-ins, builds holding the guard, an unreadable manifest, and the background pass
that a template delete triggers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import pytest_asyncio

from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig
from bac_server.control import Limits, Team
from bac_server.control.gc import GcSettings, TemplateGc
from bac_server.control.sandboxes import LIVE_STATES
from bac_server.control.templates import TemplateCatalog
from bac_server.store import (
    BuildRecord,
    CheckpointKind,
    CheckpointRecord,
    EventRecord,
    SandboxPin,
    SandboxRecord,
    TemplateRecord,
)
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore
from bac_server.templates import (
    CollectionRefused,
    LiveRefs,
    StorageCollector,
    TemplateConfig,
    TemplateStore,
)
from bac_server.templates.builtin import METADATA_FILE, find_layer, layer_digest
from bac_server.templates.gc import build_guard
from bac_server.templates.layers import LayerStore, make_built, write_manifest

CONFIG = TemplateConfig(user="user", workdir="/home/user", env=(), start_cmd=None,
                        ready_cmd=None)

SEALER = Sealer(Sealer.new_key())  # one key for every store a test reopens


def publish(root: Path, key: str, content: str = "x") -> Path:
    """A layer made the way a build step's is (a work directory, published by rename)."""
    layers = LayerStore(root / "layers")
    layers.setup()
    work = layers.new_work(key)
    work.upper.mkdir()
    (work.upper / "file").write_text(content)
    layers.publish(work, f"step {key}", {})
    return layers.diff(key)


def manifest(root: Path, rootfs: Path, *layers: Path) -> str:
    built = make_built(CONFIG, rootfs, tuple(layers), True, root)
    write_manifest(built, root)
    return built.digest


def on_disk(root: Path) -> set[str]:
    found = {f"layer {p.name}" for p in (root / "layers").iterdir()
             if not p.name.startswith(".")}
    manifests = root / "templates" / "manifests"
    return found | {f"manifest {p.stem}" for p in manifests.glob("*.json")}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


def collector(root: Path, grace_s: float = 0.0) -> StorageCollector:
    made = StorageCollector(TemplateStore(root), data_dir=root, grace_s=grace_s)
    made.register()
    return made


async def test_unreferenced_entries_wait_out_their_grace(root: Path) -> None:
    """An unreferenced manifest waits for the grace period and keeps its layers meanwhile;
    once due, the manifest and its layers go in one pass; a referenced one stays."""
    base = publish(root, "base0")
    gone_layer, kept_layer = publish(root, "gone1"), publish(root, "kept1")
    gone = manifest(root, base, gone_layer)
    kept = manifest(root, base, kept_layer)
    live = LiveRefs(digests=frozenset({kept}))
    waiting = await collector(root, grace_s=3600).collect(live)
    assert waiting.deleted == [] and {(f.kind, f.name) for f in waiting.waiting} == {
        ("manifest", gone)}
    assert waiting.next_due_s is not None and 3590 < waiting.next_due_s <= 3600
    assert on_disk(root) == {"layer base0", "layer gone1", "layer kept1", f"manifest {gone}",
                             f"manifest {kept}"}
    due = await collector(root).collect(live)
    assert {(f.kind, f.name) for f in due.deleted} == {("manifest", gone), ("layer", "gone1")}
    assert on_disk(root) == {"layer base0", "layer kept1", f"manifest {kept}"}
    assert not list((root / "layers").glob(".trash*"))


async def test_another_data_dir_on_the_root_blocks_collection_until_it_is_gone(
        root: Path, tmp_path: Path) -> None:
    """A server borrowing the root (its data dir is elsewhere) never collects it, even as
    its only user; while such a data dir exists, the root's own server deletes nothing
    either and names it; once that data dir is removed, the collection runs."""
    publish(root, "orphan")
    other = tmp_path / "other-data"
    other.mkdir()
    borrower = StorageCollector(TemplateStore(root), data_dir=other, grace_s=0)
    borrower.register()
    refused = await borrower.collect(LiveRefs())
    assert refused.skipped is not None and "belongs to another" in refused.skipped
    assert "layer orphan" in on_disk(root)
    blocked = await collector(root).collect(LiveRefs())
    assert blocked.skipped is not None and str(other.resolve()) in blocked.skipped
    assert "layer orphan" in on_disk(root)
    dry = await collector(root).collect(LiveRefs(), dry_run=True)
    assert dry.skipped is not None and "layer orphan" in on_disk(root)
    other.rmdir()
    done = await collector(root).collect(LiveRefs())
    assert done.skipped is None and "layer orphan" not in on_disk(root)
    assert len(list((root / "templates" / "users").iterdir())) == 1  # the other's went


async def test_links_work_in_progress_and_builtins(root: Path, tmp_path: Path) -> None:
    """A linked-in base (another root's) is never touched; the current build of a
    built-in stays and an older one goes; a layer a backend names through another
    spelling of the root stays; a layer being built (.tmp) is left alone."""
    store = TemplateStore(root)
    shared = tmp_path / "shared-base"
    (shared / store.base_recipe.digest()).mkdir(parents=True)
    (shared / store.base_recipe.digest() / METADATA_FILE).write_text("{}")
    (root / "templates").mkdir(mode=0o700, exist_ok=True)
    (root / "templates" / "base").symlink_to(shared)
    recipe = find_layer("code-interpreter")
    assert recipe is not None
    current = layer_digest(recipe, store.base_recipe.digest(), store.id_range.base)
    for digest in (current, "0ld0ld0ld0ld0ld0"):
        build = root / "templates" / "code-interpreter" / digest
        (build / "rootfs").mkdir(parents=True)
        (build / METADATA_FILE).write_text("{}")
    mounted = publish(root, "mounted")
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    in_progress = LayerStore(root / "layers").new_work("building")

    report = await collector(root).collect(
        LiveRefs(paths=frozenset({alias / "layers" / "mounted" / "diff"})))
    assert {(f.kind, f.name) for f in report.deleted} == {
        ("builtin", "code-interpreter/0ld0ld0ld0ld0ld0")}
    assert (root / "templates" / "code-interpreter" / current / METADATA_FILE).is_file()
    assert (shared / store.base_recipe.digest() / METADATA_FILE).is_file()
    assert mounted.is_dir() and in_progress.path.is_dir()


async def test_a_build_holding_the_guard_or_an_unreadable_manifest_stops_it(
        root: Path) -> None:
    """While a build holds the guard a collection deletes nothing (and says why); a
    template in use whose manifest cannot be read refuses the whole collection."""
    base = publish(root, "base0")
    publish(root, "orphan")
    async with build_guard(root):
        busy = await collector(root).collect(LiveRefs())
    assert busy.skipped is not None and "build" in busy.skipped
    assert "layer orphan" in on_disk(root)
    digest = manifest(root, base)
    (root / "templates" / "manifests" / f"{digest}.json").write_text("{torn")
    with pytest.raises(CollectionRefused):
        await collector(root).collect(LiveRefs(digests=frozenset({digest})))
    assert "layer orphan" in on_disk(root)


@pytest_asyncio.fixture
async def store(root: Path) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(f"sqlite+aiosqlite:///{root / 'bac.db'}", SEALER)
    yield opened
    await opened.close()


async def test_deleting_a_template_starts_a_background_pass(root: Path,
                                                            store: SqlStore) -> None:
    """With the collector running in the background, deleting a template through the
    catalog triggers a pass (the hourly one is far off) that deletes the unreferenced
    layer and manifest; nothing else needs them."""
    base = publish(root, "base0")
    digest = manifest(root, base, publish(root, "own"))
    gc = TemplateGc(gc_store=store.gc, build_store=store.builds, upload_store=store.uploads,
                    backend=NamespaceBackend(NamespaceConfig(data_dir=root)),
                    collector=collector(root), uploads_root=root / "template-uploads",
                    settings=GcSettings(interval_s=3600, grace_s=0, settle_s=0))
    catalog = TemplateCatalog(catalog_store=store.catalog, build_store=store.builds,
                              limits=Limits(), on_delete=gc.soon)
    team = Team("team", "team")
    await catalog.request_build(team, "app", tags=[], cpu_count=None, memory_mb=None)
    gc.start()
    try:
        assert await catalog.delete(team, "app") is not None
        report = await asyncio.wait_for(gc.wait_passes(1), 30)
    finally:
        await gc.close()
    assert report is not None and report.storage is not None
    assert {(f.kind, f.name) for f in report.storage.deleted} >= {("manifest", digest),
                                                                  ("layer", "own")}
    assert on_disk(root) == set() and not list((root / "layers").glob(".trash*"))


async def test_the_store_names_the_builds_something_can_still_start(store: SqlStore) -> None:
    """The digests that stay: a tagged ready build's, and those pinned by a running or
    paused sandbox, by an ended one that left a snapshot, or by a create with no row yet;
    not an untagged build's, nor one pinned only by an ended sandbox."""
    now = datetime.now(UTC)
    await store.keys.ensure_team("team")
    await store.catalog.add_template(TemplateRecord("tpl", "team", "app", False, now, now))
    for build_id, digest, tags in (("tagged", "d1", ("default",)), ("untagged", "d2", ("v1",))):
        await store.builds.add_build(BuildRecord(build_id, "tpl", "team", "building", now, now,
                                                 tags=tags))
        await store.builds.finish_build(build_id, status="ready", at=now, from_states=["building"],
                                        digest=digest)
    await store.catalog.delete_tags("tpl", ["v1"])
    for sandbox_id, state, digest in (("run", "running", "d3"), ("pause", "paused", "d4"),
                                      ("dead", "killed", "d5"), ("saved", "killed", "d6")):
        await store.sandboxes.insert_sandbox(SandboxRecord(
            sandbox_id, "team", "tpl", None, state, now, now + timedelta(minutes=5), 2, 512,
            1024, "token", None), EventRecord(sandbox_id, "team", now, "created", "", "info"))
        await store.catalog.pin_sandbox(SandboxPin(sandbox_id, "tpl", "tagged", digest))
    await store.checkpoints.add_checkpoint(CheckpointRecord(
        "snap", "team", "saved", CheckpointKind.SNAPSHOT, None, now, 1, True, "tpl", "token", 2,
        512))
    await store.catalog.pin_sandbox(SandboxPin("creating", "tpl", "tagged", "d7"))
    assert await store.gc.live_digests([s.value for s in LIVE_STATES]) == {
        "d1", "d3", "d4", "d6", "d7"}
