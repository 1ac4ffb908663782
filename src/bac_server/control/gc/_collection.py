"""Collecting what templates leave behind: unused layers, images, manifests, old builds of
the built-ins, and uploaded build contexts nobody used for a while.

    gc = TemplateGc(gc_store=..., build_store=..., upload_store=..., backend=backend,
                    collector=collector, uploads_root=data_dir / "template-uploads",
                    settings=GcSettings())
    gc.start()                      # a pass every interval_s, and soon after gc.soon()
    report = await gc.run(dry_run=True)
    await gc.close()

A pass asks the store which built templates something can still start from (tagged ready
builds; builds that a live, paused or checkpointed sandbox is pinned to, or a create in
flight), then the backend which layers its sandboxes, build steps and checkpoints mount
(``LayerHolder``), and hands both to the template layer's ``StorageCollector``, which
deletes the rest after a quarantine of ``grace_s``. It fails closed: a backend that cannot
say what it mounts, or a record it cannot read, means no template storage is collected in
that pass. Uploads expire after ``upload_ttl_s`` unused (:mod:`._uploads`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bac_server.backends.base import Backend, BackendError, LayerHolder
from bac_server.store import BuildStore, GcStore, UploadStore
from bac_server.templates import (
    CollectionRefused,
    LiveRefs,
    StorageCollector,
    StorageReport,
)

from ..sandboxes import LIVE_STATES
from ._uploads import ExpiredUpload, expire_uploads

log = logging.getLogger(__name__)

ORPHAN_UPLOAD_MIN_S = 3600.0  # a file with no row may be an upload whose row comes next


@dataclass(frozen=True)
class GcSettings:
    interval_s: float = 3600.0  # between passes; 0: no passes in the background
    grace_s: float = 900.0  # how long an entry stays unreferenced before it is deleted
    upload_ttl_s: float = 7 * 86_400.0  # an upload unused this long is deleted
    settle_s: float = 5.0  # after a trigger (a template deleted), wait for more first


@dataclass
class GcReport:
    dry_run: bool
    storage: StorageReport | None = None  # None: template storage was not looked at
    storage_skipped: str | None = None  # why (also ``storage.skipped``)
    uploads: list[ExpiredUpload] = field(default_factory=list)

    @property
    def freed_bytes(self) -> int:
        kept = self.storage.freed_bytes if self.storage is not None else 0
        return kept + sum(u.size for u in self.uploads)

    def to_json(self) -> dict[str, Any]:
        storage = self.storage
        return {
            "dryRun": self.dry_run,
            "skipped": self.storage_skipped or (storage.skipped if storage else None),
            "root": str(storage.root) if storage else None,
            "deleted": [asdict(f) for f in storage.deleted] if storage else [],
            "waiting": [asdict(f) for f in storage.waiting] if storage else [],
            "busy": list(storage.busy) if storage else [],
            "kept": dict(storage.kept) if storage else {},
            "scanned": storage.scanned if storage else 0,
            "staleLocks": storage.stale_locks if storage else 0,
            "uploads": [asdict(u) for u in self.uploads],
            "freedBytes": self.freed_bytes,
            "tookSeconds": round(storage.took_s, 3) if storage else 0.0,
        }


class TemplateGc:
    def __init__(self, *, gc_store: GcStore, build_store: BuildStore, upload_store: UploadStore,
                 backend: Backend, collector: StorageCollector | None, uploads_root: Path,
                 settings: GcSettings) -> None:
        self._gc_store = gc_store
        self._build_store = build_store
        self._upload_store = upload_store
        self._backend = backend
        self._collector = collector
        self._uploads_root = uploads_root
        self.settings = settings
        self._running = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.passes = 0
        self.last: GcReport | None = None
        # Whether this process collects template storage now (several API replicas: the
        # leader only; the others expire their own uploads).
        self.leads: Callable[[], bool] = lambda: True
        self._passed = asyncio.Condition()

    async def run(self, *, dry_run: bool = False) -> GcReport:
        """One pass (one at a time in this process; other processes: the guard)."""
        async with self._running:
            s = self.settings
            report = GcReport(dry_run=dry_run)
            report.uploads = await expire_uploads(
                self._upload_store, self._build_store, self._uploads_root,
                ttl_s=s.upload_ttl_s, orphan_s=max(s.grace_s, ORPHAN_UPLOAD_MIN_S), dry_run=dry_run)
            report.storage_skipped, live = await self._live()
            if live is not None and self._collector is not None:
                try:
                    report.storage = await self._collector.collect(live, dry_run=dry_run)
                except CollectionRefused as exc:
                    report.storage_skipped = str(exc)
            if not dry_run:
                async with self._passed:
                    self.passes += 1
                    self.last = report
                    self._passed.notify_all()
            return report

    async def wait_passes(self, count: int) -> GcReport | None:
        """Wait until ``count`` passes have run in this process; the last one's report."""
        async with self._passed:
            await self._passed.wait_for(lambda: self.passes >= count)
            return self.last

    async def _live(self) -> tuple[str | None, LiveRefs | None]:
        """What must stay, or why template storage cannot be collected now."""
        if self._collector is None:
            return "this server collects no template storage", None
        if not self.leads():
            return "another API replica leads: it collects the template storage", None
        backend = self._backend
        if not isinstance(backend, LayerHolder):
            return "the backend cannot say which layers its sandboxes use", None
        digests = await self._gc_store.live_digests([s.value for s in LIVE_STATES])
        try:
            paths = await backend.layers_in_use()
        except BackendError as exc:
            return f"the backend's layer records cannot be read: {exc}", None
        return None, LiveRefs(frozenset(digests), paths)

    # in the background --------------------------------------------------------------------
    def start(self) -> None:
        """Passes every ``interval_s``, sooner when something waits for its grace to end
        or ``soon`` was called. Nothing when ``interval_s`` is 0."""
        if self.settings.interval_s > 0 and self._task is None:
            self._task = asyncio.create_task(self._loop(), name="template-gc")

    def soon(self) -> None:
        """Ask for a pass shortly (a template was deleted); bursts make one pass."""
        self._wake.set()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self._next_wait())
                # Deletes come in bursts (and a template's start snapshots go just after
                # it): one pass after they settle.
                await asyncio.sleep(self.settings.settle_s)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                report = await self.run()
            except Exception:
                log.exception("template storage collection failed")
                continue
            _log_pass(report)

    def _next_wait(self) -> float:
        wait = self.settings.interval_s
        storage = self.last.storage if self.last is not None else None
        if storage is not None and storage.next_due_s is not None:
            wait = min(wait, storage.next_due_s + 1.0)
        return wait


def _log_pass(report: GcReport) -> None:
    storage = report.storage
    skipped = report.storage_skipped or (storage.skipped if storage else None)
    if skipped:
        log.info("template storage not collected: %s", skipped)
    deleted = storage.deleted if storage is not None else []
    if not (deleted or report.uploads):
        return
    kinds: dict[str, int] = {}
    for freed in deleted:
        kinds[freed.kind] = kinds.get(freed.kind, 0) + 1
    log.info("template storage collected: %.1f MiB freed (%s, %d uploads); %d entries "
             "waiting for their grace period; %.2fs",
             report.freed_bytes / (1 << 20),
             ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items())) or "nothing",
             len(report.uploads), len(storage.waiting) if storage else 0,
             storage.took_s if storage else 0.0)
