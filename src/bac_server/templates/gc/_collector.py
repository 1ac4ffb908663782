"""Collecting template storage: delete the layers, images, built-in builds and manifests
that nothing can start from any more, and report what was found, deleted and kept.

    collector = StorageCollector(store, data_dir=data_dir, grace_s=900)
    collector.register()                                  # at start-up: this data dir uses it
    report = await collector.collect(LiveRefs(digests, paths), dry_run=False)

What stays: every manifest whose digest the caller names (tagged or pinned builds), and
every entry (``_scan``) that a kept manifest stacks or that a path the caller names
(the backend's slots and checkpoints) lies in, plus the current build of each built-in.
Everything else is *unreferenced*; it is deleted once collections have seen it so for
``grace_s`` (``_marks``). A manifest still in quarantine keeps its layers, so a
template's layers go one grace period after its manifest. Deleting is a rename into a
trash directory under the entry's build lock, then a removal (``_trash``); the moves
happen under the collection guard (``_guard``), so never while a build runs. Only the
server whose data directory the template root is collects it, and only while no other
existing data directory uses it too (``_users``). A collection never follows a
symbolic link out of the root.

Error tree (template layer, collection)::

    TemplateError
    └── CollectionRefused   what must stay cannot be known (a live manifest is unreadable)
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from bac_server.backends.base import TemplateNotFound

from .._errors import TemplateError
from .._store import TemplateStore
from ..builtin import BASE_ALIASES, LAYERS
from ..layers import LayerStore, read_manifest
from ._guard import collection_guard, try_lock
from ._marks import load_marks, save_marks
from ._scan import (
    Entry,
    Kind,
    Roots,
    builtin_entries,
    disk_usage,
    image_entries,
    layer_entries,
    manifest_entries,
    owner,
)
from ._trash import TRASH, empty, move_to_trash
from ._users import other_users, register_user, user_dir_of

_ORDER = {Kind.MANIFEST: 0, Kind.BUILTIN: 1, Kind.IMAGE: 2, Kind.LAYER: 3}


class CollectionRefused(TemplateError):
    """What must stay cannot be known, so nothing is deleted."""


@dataclass(frozen=True)
class LiveRefs:
    """What must stay, as the caller knows it: the digests of built templates something
    can still start from (tagged ready builds, builds sandboxes are pinned to), and every
    layer or rootfs path a backend's sandboxes, build steps or checkpoints mount."""

    digests: frozenset[str] = frozenset()
    paths: frozenset[Path] = frozenset()


@dataclass(frozen=True)
class Freed:
    kind: str  # layer | image | builtin | manifest
    name: str
    size: int  # bytes on disk
    unreferenced_s: float = 0.0  # how long collections have seen it unreferenced


@dataclass
class StorageReport:
    root: Path
    dry_run: bool
    # Why nothing was collected (another data dir uses the root, a build is running);
    # None when the collection ran.
    skipped: str | None = None
    deleted: list[Freed] = field(default_factory=list)  # or, in a dry run, would be
    waiting: list[Freed] = field(default_factory=list)  # unreferenced, in quarantine
    busy: list[str] = field(default_factory=list)  # due, but being built right now
    kept: dict[str, int] = field(default_factory=dict)  # referenced entries, by kind
    stale_locks: int = 0
    scanned: int = 0
    took_s: float = 0.0
    next_due_s: float | None = None  # seconds until the next waiting entry is due

    @property
    def freed_bytes(self) -> int:
        return sum(f.size for f in self.deleted)


def builtin_names() -> tuple[str, ...]:
    return (*sorted(BASE_ALIASES), *(r.name for r in LAYERS))


class StorageCollector:
    def __init__(self, store: TemplateStore, *, data_dir: Path, grace_s: float,
                 fleet: bool = False) -> None:
        """``fleet``: the template root of several machines on one database (API
        replicas and node agents, docs/scale-out.md), collected by whoever the caller
        lets (the replicas' leader) with what every node mounts in its live references,
        whatever data dir this process has. It registers no user of the root, and skips
        when any server has registered as one (a root shared with a server of its own
        store could lose what that store still needs)."""
        if grace_s < 0:
            raise ValueError(f"grace_s must be >= 0, got {grace_s}")
        self.store = store
        self.data_dir = data_dir
        self.grace_s = grace_s
        self.fleet = fleet
        self.roots = Roots.of(store.data_dir)

    def register(self) -> None:
        """Note that this data dir uses the template root (blocking; at start-up)."""
        if not self.fleet:
            register_user(self.store.data_dir, self.data_dir)

    async def collect(self, live: LiveRefs, *, dry_run: bool = False) -> StorageReport:
        started = time.monotonic()
        current = await self._current_builtins()
        report = await asyncio.to_thread(self._collect, live, current, dry_run)
        report.took_s = time.monotonic() - started
        return report

    async def _current_builtins(self) -> set[tuple[Kind, str]]:
        """The build of each built-in that sandboxes of it start from now."""
        found: set[tuple[Kind, str]] = set()
        for name in builtin_names():
            try:
                image = await self.store.get(name)
            except TemplateNotFound:
                continue
            owned = owner(image.rootfs, self.roots)
            if owned is not None:
                found.add(owned)
        return found

    # the collection (blocking) -----------------------------------------------------------
    def _collect(self, live: LiveRefs, current: set[tuple[Kind, str]],
                 dry_run: bool) -> StorageReport:
        report = StorageReport(root=self.roots.root, dry_run=dry_run)
        if not self.fleet and self.roots.root != Roots.of(self.data_dir).root:
            # SECURITY: a borrowed template root is collected only by the server whose data
            # dir it is; what the other servers on it still need is in their own stores.
            report.skipped = (f"the template directory {self.roots.root} belongs to another "
                              "data directory; only the server whose data directory it is "
                              "collects it")
            return report
        # A fleet's registrations name data dirs of other machines: never forgotten here.
        others = other_users(self.store.data_dir, self.data_dir,
                             forget_gone=not dry_run and not self.fleet)
        if others:
            report.skipped = ("other data directories use this template root: "
                              + ", ".join(f"{user_dir_of(p)} ({p})" for p in others))
            return report
        if not dry_run:
            self._empty_trash()  # what a collection cut short left
        moved: list[tuple[Entry, Path]] = []
        with collection_guard(self.store.data_dir) as got:
            if not got:
                report.skipped = "a template build or another collection is running"
                return report
            due, waiting, firsts = self._decide(live, current, report)
            for entry in sorted(due, key=lambda e: _ORDER[e.kind]):
                if dry_run:
                    continue
                trashed = move_to_trash(entry)
                if trashed is None:
                    report.busy.append(entry.label)
                else:
                    moved.append((entry, trashed))
            if not dry_run:
                report.stale_locks = self._stale_locks()
                gone = {entry.label for entry, _ in moved}
                save_marks(self.store.data_dir,
                           {k: v for k, v in firsts.items() if k not in gone})
        now = time.time()

        def age(entry: Entry) -> float:
            return max(0.0, now - firsts.get(entry.label, now))

        sized = moved if not dry_run else [(e, e.path) for e in due]
        report.deleted = [self._freed(e, p, age(e)) for e, p in sized]
        report.waiting = [self._freed(e, e.path, age(e)) for e in waiting]
        if waiting:
            report.next_due_s = max(0.0, self.grace_s - max(age(e) for e in waiting))
        if not dry_run:
            self._empty_trash()
        return report

    def _decide(self, live: LiveRefs, current: set[tuple[Kind, str]], report: StorageReport
                ) -> tuple[list[Entry], list[Entry], dict[str, float]]:
        """(due, waiting, the marks to keep); ``report.kept`` and ``scanned`` filled."""
        now = time.time()
        old = load_marks(self.store.data_dir)
        marks: dict[str, float] = {}

        def split(dead: list[Entry]) -> tuple[list[Entry], list[Entry]]:
            due: list[Entry] = []
            waiting: list[Entry] = []
            for entry in dead:
                marks[entry.label] = first = old.get(entry.label, now)
                (due if now - first >= self.grace_s else waiting).append(entry)
            return due, waiting

        manifests = manifest_entries(self.roots)
        due_manifests, waiting = split([m for m in manifests if m.name not in live.digests])
        kept = [m for m in manifests if m not in due_manifests]
        paths = set(live.paths) | self._stacked(kept, live.digests)
        referenced = {o for o in (owner(p, self.roots) for p in paths) if o is not None}
        referenced |= current
        entries = [*builtin_entries(self.roots, builtin_names()),
                   *image_entries(self.roots), *layer_entries(self.roots)]
        dead = [e for e in entries if (e.kind, e.name) not in referenced]
        due, waiting_entries = split(dead)
        report.scanned = len(manifests) + len(entries)
        report.kept[Kind.MANIFEST.value] = len(manifests) - len(due_manifests) - len(waiting)
        for kind in (Kind.BUILTIN, Kind.IMAGE, Kind.LAYER):
            report.kept[kind.value] = sum(e.kind is kind for e in entries) - sum(
                e.kind is kind for e in dead)
        return [*due_manifests, *due], [*waiting, *waiting_entries], marks

    def _stacked(self, manifests: list[Entry], live: frozenset[str]) -> set[Path]:
        """Every rootfs and layer the manifests stack."""
        paths: set[Path] = set()
        for entry in manifests:
            try:
                built = read_manifest(entry.name, self.store.data_dir)
            except TemplateNotFound:
                continue  # gone meanwhile, or not a digest: nothing can start from it
            except (ValueError, KeyError, TypeError) as exc:
                if entry.name in live:
                    raise CollectionRefused(f"the manifest {entry.path} of a template in use "
                                            f"is unreadable ({exc}); nothing was collected") \
                        from exc
                continue  # unreadable: nothing can start from it either
            paths.add(built.rootfs)
            paths.update(built.layers)
        return paths

    def _stale_locks(self) -> int:
        """Build locks of layers and images that were never published (failed builds)."""
        removed = 0
        layers = LayerStore(self.roots.layers)
        building = {p.name.split(".", 1)[0] for p in _listing(self.roots.layers / ".tmp")}
        for lock in _listing(self.roots.layers / ".locks"):
            if lock.name in building or layers.get(lock.name) is not None:
                continue
            removed += _unlink_unheld(lock)
        for lock in _listing(self.roots.images / ".locks"):
            if not (self.roots.images / lock.name.removesuffix(".lock")).exists():
                removed += _unlink_unheld(lock)
        return removed

    def _empty_trash(self) -> None:
        r = self.roots
        for parent in (r.layers, r.images, r.templates, r.manifests):
            empty(parent / TRASH)

    def _freed(self, entry: Entry, path: Path, age: float) -> Freed:
        size = None
        if entry.kind is Kind.LAYER:
            info = LayerStore(path.parent).get(path.name)
            size = None if info is None else info.size
        return Freed(entry.kind.value, entry.name,
                     disk_usage(path) if size is None else size, age)


def _listing(directory: Path) -> list[Path]:
    try:
        return [p for p in directory.iterdir() if not p.name.startswith(".")]
    except FileNotFoundError:
        return []


def _unlink_unheld(lock: Path) -> int:
    fd = try_lock(lock)
    if fd is None:
        return 0
    try:
        lock.unlink(missing_ok=True)
        return 1
    finally:
        os.close(fd)
