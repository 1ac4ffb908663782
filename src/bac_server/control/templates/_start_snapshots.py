"""Start snapshots, the control plane's part: when a built template gets one, which one a
create names, and when one goes. Making one, and sandboxes from one, is the backend's
(``backends.base.StartSnapshotter``).

    snapshots = StartSnapshots(backend=..., images=template_store, catalog_store=...,
                               build_store=..., root=...)
    await snapshots.take(template_id, built, vcpus=2, memory_mb=512, say=...)  # after a build
    image = await snapshots.image_of(resolved)   # a create: the image naming its snapshot
    await snapshots.lost(resolved, image)        # the backend found it unusable
    await snapshots.forget(template_id)          # the template was deleted
    await snapshots.close()                      # the server stops: takes in flight end

*Taking* (the end of every build, when the feature is on and the backend can save
memory): the backend starts an internal sandbox from the built template with the build's
resources and a token of its own, waits until the ready command succeeds
(``ready_bound_s``; a template without one runs ``true``, so that envd has served a
command, its code imported and its first allocations made, before it is frozen),
checkpoints it with its memory and destroys it. A failure only costs speed: it is logged
(warn) and the template's sandboxes boot. An identical rebuild of the template (same
manifest digest) reuses its snapshot.

*Built-ins* (base, code-interpreter, desktop) are built by the set-up, not by a build: the
first create from one starts taking its snapshot in the background (with the default
resources) and boots meanwhile; the creates after it restore. Their snapshots last as long
as the server process: the next start drops them with the other records of templates the
catalog does not know, so a server upgraded with a new envd never hands out the old one.

*Using*: a create from a template that has one gets an image naming it
(``TemplateImage.start_snapshot``: the checkpoint and the token it was taken with); the
backend hands out a sandbox restored from it ahead, or restores one, or boots, and says
when the snapshot can never be restored (``start_snapshot_lost``). Each sandbox gets its
own id, token, env vars, network policy and limits; envd is re-initialised, so env vars
given at create reach every process started afterwards, while the service keeps the
environment it was started with (the template's), as in a booted sandbox, whose start
command runs before ``/init``. All sandboxes of a snapshot share the service's memory as
it was when taken: random state drawn at start (a seeded PRNG, a generated secret) is the
same in each.

*Dropping*: a template's snapshots go with the template (``forget``); at each build,
those of digests no tag can reach any more (no create can resolve to them); one the
backend reported lost; at the first use after a restart, half-taken ones and those of
deleted templates. Snapshots are the server's: no team's checkpoint quota counts them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bac_server.backends.base import (
    Backend,
    BackendError,
    StartSnapshotRef,
    StartSnapshotter,
    TemplateImage,
)
from bac_server.cancel_safe import to_the_end
from bac_server.store import BuildStore, CatalogStore
from bac_server.templates import BuiltTemplate, LogLevel

from ..tokens import new_access_token, new_checkpoint_id
from ._build_states import BuildStatus
from ._resolve import BuiltImages, Resolved
from ._snapshot_records import SnapshotRecords, StartSnapshot

log = logging.getLogger(__name__)

READY_BOUND_S = 60.0
# Run in a template without a ready command before its snapshot is taken: envd has then
# served a command (imports done, first allocations made) in every sandbox restored from it.
WARM_UP_CMD = "true"
BUILTIN_DELAY_S = 2.0  # after a built-in's first create, before its snapshot is taken
Say = Callable[[LogLevel, str], None]
_Key = tuple[str, str]


class StartSnapshots:
    def __init__(self, *, backend: Backend, images: BuiltImages, catalog_store: CatalogStore,
                 build_store: BuildStore, root: Path, enabled: bool = True,
                 ready_bound_s: float = READY_BOUND_S, default_vcpus: int = 2,
                 default_memory_mb: int = 512) -> None:
        self._backend = backend
        self._images = images
        self._catalog_store = catalog_store
        self._build_store = build_store
        self._records = SnapshotRecords(root)
        self._enabled = enabled
        self._ready_bound_s = ready_bound_s
        self._known: dict[_Key, StartSnapshot] | None = None
        self._loading = asyncio.Lock()
        self._locks: dict[_Key, asyncio.Lock] = {}
        # Built-ins: their default resources, the takes under way and those that failed
        # (not retried before the next start: a failure costs speed only).
        self._builtin_shape = (default_vcpus, default_memory_mb)
        self._builtin_takes: dict[_Key, asyncio.Task[None]] = {}
        self._builtin_failed: set[_Key] = set()
        self._closed = False

    # taking -------------------------------------------------------------------------------
    async def take(self, template_id: str, built: BuiltTemplate, *, vcpus: int,
                   memory_mb: int, say: Say) -> StartSnapshot | None:
        """The template's start snapshot, taken now or reused; None (and why, in the log)
        when its sandboxes will boot. Never raises for a snapshot that could not be made."""
        backend = self._backend
        if not self._enabled or not isinstance(backend, StartSnapshotter) or \
                not backend.takes_start_snapshots:
            why = ("start snapshots are turned off on this server (BAC_START_SNAPSHOTS)"
                   if not self._enabled else "this host cannot save a sandbox's memory")
            say(LogLevel.INFO, f"no start snapshot: {why}; sandboxes boot")
            return None
        key = (template_id, built.digest)
        async with self._locks.setdefault(key, asyncio.Lock()):
            if (found := (await self._loaded()).get(key)) is not None:
                say(LogLevel.INFO, f"start snapshot reused ({_mib(found.size_bytes)})")
                await self._prune(template_id, keep=built.digest)
                return found
            say(LogLevel.INFO, "taking start snapshot")
            try:
                made = await self._take(backend, template_id, built, vcpus, memory_mb)
            except (BackendError, OSError) as exc:
                say(LogLevel.WARN, f"start snapshot not taken, sandboxes of this template "
                                   f"boot: {exc}")
                return None
        say(LogLevel.INFO, f"start snapshot taken in {made.took_s:.1f}s "
                           f"({_mib(made.size_bytes)})")
        await self._prune(template_id, keep=built.digest)
        return made

    async def _take(self, backend: StartSnapshotter, template_id: str, built: BuiltTemplate,
                    vcpus: int, memory_mb: int) -> StartSnapshot:
        image = await self._images.built(built.digest, template_id)
        return await self._checkpoint(backend, template_id, built.digest, image, vcpus,
                                      memory_mb, built.config.ready_cmd or WARM_UP_CMD)

    async def _checkpoint(self, backend: StartSnapshotter, template_id: str, digest: str,
                          image: TemplateImage, vcpus: int, memory_mb: int,
                          ready_cmd: str) -> StartSnapshot:
        started = time.monotonic()
        pending = StartSnapshot(template_id=template_id, digest=digest,
                                checkpoint_id=new_checkpoint_id(), token=new_access_token())
        # Recorded before the checkpoint exists: a crash in between leaves a name to
        # delete (see ``_loaded``), never an unknown checkpoint.
        await asyncio.to_thread(self._records.write, pending)
        try:
            info = await backend.take_start_snapshot(
                image, pending.checkpoint_id, token=pending.token, vcpus=vcpus,
                memory_mb=memory_mb, ready_cmd=ready_cmd, ready_bound_s=self._ready_bound_s)
            made = dataclasses.replace(pending, size_bytes=info.size_bytes,
                                       created_at=time.time(), complete=True,
                                       took_s=time.monotonic() - started)
            await asyncio.to_thread(self._records.write, made)
        except BaseException:
            await _shielded(self._drop(pending))
            raise
        known = await self._loaded()
        known[(template_id, digest)] = made
        return made

    # using --------------------------------------------------------------------------------
    async def image_of(self, resolved: Resolved) -> TemplateImage:
        """The image a create from ``resolved`` starts: naming the build's start snapshot
        when it has one."""
        if not self._enabled:
            return resolved.image
        if resolved.template_id is None:
            return await self._builtin_image(resolved.image)
        if resolved.digest is None:
            return resolved.image
        found = (await self._loaded()).get((resolved.template_id, resolved.digest))
        if found is None:
            return resolved.image
        return dataclasses.replace(resolved.image, start_snapshot=StartSnapshotRef(
            found.checkpoint_id, found.token))

    async def _builtin_image(self, image: TemplateImage) -> TemplateImage:
        key = (image.template_id, _builtin_digest(image))
        found = (await self._loaded()).get(key)
        if found is not None:
            return dataclasses.replace(image, start_snapshot=StartSnapshotRef(
                found.checkpoint_id, found.token))
        backend = self._backend
        if not self._closed and key not in self._builtin_takes and \
                key not in self._builtin_failed and isinstance(backend, StartSnapshotter) \
                and backend.takes_start_snapshots:
            self._builtin_takes[key] = asyncio.create_task(
                self._take_builtin(backend, key, image),
                name=f"bac-start-snapshot-{image.template_id}")
        return image

    async def _take_builtin(self, backend: StartSnapshotter, key: _Key,
                            image: TemplateImage) -> None:
        vcpus, memory_mb = self._builtin_shape
        try:
            # Not a synchronisation: the create that asked is about to run its first
            # commands; the snapshot's boot and dump take both CPUs of a small host.
            await asyncio.sleep(BUILTIN_DELAY_S)
            async with self._locks.setdefault(key, asyncio.Lock()):
                made = await self._checkpoint(backend, key[0], key[1], image, vcpus,
                                              memory_mb, image.warm_up or WARM_UP_CMD)
            log.info("start snapshot of built-in template %s taken in %.1f s (%s)",
                     image.template_id, made.took_s, _mib(made.size_bytes))
        except (BackendError, OSError) as exc:
            self._builtin_failed.add(key)
            log.warning("no start snapshot of built-in template %s, its sandboxes boot: %s",
                        image.template_id, exc)
        finally:
            self._builtin_takes.pop(key, None)

    async def wait_builtin(self, image: TemplateImage) -> bool:
        """Wait for the built-in template's snapshot under way, if any; whether it has
        one now (for tests and benchmarks that must know which path a create takes)."""
        key = (image.template_id, _builtin_digest(image))
        task = self._builtin_takes.get(key)
        if task is not None:
            await asyncio.shield(task)
        return key in (await self._loaded())

    async def close(self) -> None:
        """Stop the built-in snapshots under way (each destroys its internal sandbox and
        drops its half-taken checkpoint as it unwinds)."""
        self._closed = True
        takes = list(self._builtin_takes.values())
        for task in takes:
            task.cancel()
        await asyncio.gather(*takes, return_exceptions=True)

    async def lost(self, resolved: Resolved, image: TemplateImage) -> None:
        """The backend could not restore ``image``'s start snapshot and never will: drop it
        (unless a newer one replaced it meanwhile). Failures are logged, not raised."""
        ref = image.start_snapshot
        if ref is None:
            return
        if resolved.template_id is None:
            key = (image.template_id, _builtin_digest(image))
            self._builtin_failed.add(key)  # not retaken before the next start
        elif resolved.digest is None:
            return
        else:
            key = (resolved.template_id, resolved.digest)
        found = (await self._loaded()).get(key)
        if found is None or found.checkpoint_id != ref.checkpoint_id:
            return
        log.warning("the start snapshot of template %s cannot be restored any more; its "
                    "sandboxes boot", resolved.template_id)
        try:
            await self._drop(found)
        except (BackendError, OSError):
            log.exception("dropping start snapshot %s", found.checkpoint_id)

    # dropping -----------------------------------------------------------------------------
    async def forget(self, template_id: str) -> None:
        """Delete every start snapshot of the template (it was deleted)."""
        for found in [s for s in (await self._loaded()).values()
                      if s.template_id == template_id]:
            await self._drop(found)

    async def _prune(self, template_id: str, *, keep: str) -> None:
        """Drop the template's snapshots of builds no tag points at. Skipped while another
        build of it runs: its snapshot may be taken and not yet tagged."""
        builds = await self._build_store.list_builds(template_id)
        if sum(b.status == BuildStatus.BUILDING.value for b in builds) > 1:
            return
        tagged = {t.build_id for t in await self._catalog_store.list_tags(template_id)}
        reachable = {b.digest for b in builds if b.build_id in tagged and b.digest} | {keep}
        for found in [s for s in (await self._loaded()).values()
                      if s.template_id == template_id and s.digest not in reachable]:
            await self._drop(found)

    async def _drop(self, found: StartSnapshot) -> None:
        if isinstance(self._backend, StartSnapshotter):
            # Its sandboxes kept restored ahead go with it; idempotent.
            await self._backend.delete_start_snapshot(found.checkpoint_id)
        await asyncio.to_thread(self._records.remove, found.template_id, found.digest)
        known = self._known or {}
        if known.get((found.template_id, found.digest)) is found:
            del known[(found.template_id, found.digest)]

    async def _loaded(self) -> dict[_Key, StartSnapshot]:
        """The records, read once; what a crash or a deleted template left is dropped."""
        async with self._loading:
            if self._known is not None:
                return self._known
            known: dict[_Key, StartSnapshot] = {}
            for found in await asyncio.to_thread(self._records.load):
                if not found.complete or await self._catalog_store.get_template(found.template_id) \
                        is None:
                    try:
                        await self._drop(found)
                    except (BackendError, OSError):
                        log.exception("dropping start snapshot %s", found.checkpoint_id)
                    continue
                known[(found.template_id, found.digest)] = found
            self._known = known
            return known


async def _shielded(cleanup: Coroutine[Any, Any, None]) -> None:
    """Run cleanup to its end even if the caller is cancelled meanwhile; a failed cleanup
    is logged, never raised over what caused it."""
    try:
        await to_the_end(cleanup)
    except Exception:
        log.exception("cleaning up after a start snapshot")


def _builtin_digest(image: TemplateImage) -> str:
    """A built-in's identity: its layers (their directories are named by the recipe's
    hash) and what its sandboxes start with."""
    facts = json.dumps([[str(p) for p in image.layer_stack], image.allow_setuid,
                        image.default_user, image.default_workdir, list(image.env)])
    return hashlib.sha256(facts.encode()).hexdigest()[:32]


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB on disk"
