"""Start snapshots: a built template kept as a checkpoint of a started, ready sandbox, so
that creating a sandbox from it is a restore, not a boot.

    snapshots = StartSnapshots(backend=..., images=template_store, catalog_store=...,
                               build_store=..., root=...)
    await snapshots.take(template_id, built, vcpus=2, memory_mb=512, say=...)  # after a build
    sandbox_id = snapshots.claim(resolved, ...) or new_sandbox_id()   # a create ...
    endpoint = await snapshots.start(spec, resolved)   # ... pooled, restored, else booted
    await snapshots.forget(template_id)                # the template was deleted

*Taking* (the end of a build whose template has a start or ready command, when the backend
saves memory): an internal sandbox (its own id and token, no team's quota) is created from
the built template with the build's resources; create returns once envd's supervisor
reports the service ready, and the ready command is then run inside until it succeeds
(``template_snapshots_envd``: the supervisor stops waiting after its bound, a snapshot must
not); the sandbox is checkpointed with its memory and destroyed. A failure only costs
speed: it is logged (warn) and the template's sandboxes boot. An identical rebuild of the
template (same manifest digest) reuses its snapshot.

*Starting* (``template_snapshots_start``, ``template_snapshots_pool``): the new sandbox
gets its own id, token, env vars, network policy and limits; envd is re-initialised, so
env vars given at create reach every process started afterwards, while the service keeps
the environment it was started with (the template's), as in a booted sandbox, whose start
command runs before ``/init``. All sandboxes of a snapshot share the service's memory as
it was when taken: random state drawn at start (a seeded PRNG, a generated secret) is the
same in each.

*Dropping*: a template's snapshots go with the template (``forget``); at each build, those
of digests no tag can reach any more (no create can resolve to them); at the first use
after a restart, half-taken ones and those of deleted templates.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bac_server.backends.base import (
    Backend,
    BackendError,
    Checkpointable,
    SandboxEndpoint,
    SandboxSpec,
    TemplateImage,
)
from bac_server.backends.egress import EgressPolicy
from bac_server.control.checkpoints import new_checkpoint_id
from bac_server.control.template_builds_states import BuildStatus
from bac_server.control.template_snapshots_envd import NotReady, wait_until_ready
from bac_server.control.template_snapshots_records import SnapshotRecords, StartSnapshot
from bac_server.control.template_snapshots_start import SnapshotStarts
from bac_server.control.templates_resolve import BuiltImages, Resolved
from bac_server.control.tokens import new_access_token, new_sandbox_id
from bac_server.store import BuildStore, CatalogStore
from bac_server.templates import BuiltTemplate, LogLevel

log = logging.getLogger(__name__)

READY_BOUND_S = 60.0
Say = Callable[[LogLevel, str], None]
_Key = tuple[str, str]


class StartSnapshots:
    def __init__(self, *, backend: Backend, images: BuiltImages, catalog_store: CatalogStore,
                 build_store: BuildStore, root: Path, enabled: bool = True,
                 ready_bound_s: float = READY_BOUND_S, pool_size: int = 0) -> None:
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
        self._starts = SnapshotStarts(backend=backend, pool_size=pool_size, find=self._find,
                                      peek=self._peek, drop=self._drop)

    def _checkpointable(self) -> Checkpointable | None:
        backend = self._backend
        if isinstance(backend, Checkpointable) and backend.memory_checkpoints:
            return backend
        return None

    # taking -------------------------------------------------------------------------------
    async def take(self, template_id: str, built: BuiltTemplate, *, vcpus: int,
                   memory_mb: int, say: Say) -> StartSnapshot | None:
        """The template's start snapshot, taken now or reused; None (and why, in the log)
        when its sandboxes will boot. Never raises for a snapshot that could not be made."""
        config = built.config
        if config.start_cmd is None and config.ready_cmd is None:
            return None
        backend = self._checkpointable()
        if not self._enabled or backend is None:
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
            except (NotReady, BackendError, OSError) as exc:
                say(LogLevel.WARN, f"start snapshot not taken, sandboxes of this template "
                                   f"boot: {exc}")
                return None
        say(LogLevel.INFO, f"start snapshot taken in {made.took_s:.1f}s "
                           f"({_mib(made.size_bytes)})")
        await self._prune(template_id, keep=built.digest)
        return made

    async def _take(self, backend: Checkpointable, template_id: str, built: BuiltTemplate,
                    vcpus: int, memory_mb: int) -> StartSnapshot:
        image = await self._images.built(built.digest, template_id)
        assert isinstance(image, TemplateImage)
        token = new_access_token()
        spec = SandboxSpec(sandbox_id=new_sandbox_id(), template=image, vcpus=vcpus,
                           memory_mb=memory_mb, envd_access_token=token)
        started = time.monotonic()
        pending = StartSnapshot(template_id=template_id, digest=built.digest,
                                checkpoint_id=new_checkpoint_id(), token=token)
        try:
            endpoint = await self._backend.create(spec)
            if built.config.ready_cmd is not None:
                await wait_until_ready(endpoint, token=token, user=image.default_user,
                                       cwd=image.default_workdir,
                                       ready_cmd=built.config.ready_cmd,
                                       bound_s=self._ready_bound_s)
            # Recorded before the checkpoint exists: a crash in between leaves a name to
            # delete (see ``_loaded``), never an unknown checkpoint.
            await asyncio.to_thread(self._records.write, pending)
            try:
                info = await backend.checkpoint(spec.sandbox_id, pending.checkpoint_id,
                                                memory=True)
                made = dataclasses.replace(pending, size_bytes=info.size_bytes,
                                           created_at=time.time(), complete=True,
                                           took_s=time.monotonic() - started)
                await asyncio.to_thread(self._records.write, made)
            except BaseException:
                await _shielded(self._drop(pending))
                raise
        finally:
            await _shielded(self._backend.destroy(spec.sandbox_id))
        known = await self._loaded()
        known[(template_id, built.digest)] = made
        return made

    # starting (template_snapshots_start) -------------------------------------------------
    def claim(self, resolved: Resolved, *, vcpus: int, memory_mb: int, disk_mb: int,
              network: EgressPolicy) -> str | None:
        """The id of a sandbox restored ahead for this create, reserved; None if none fits.
        Synchronous, so a creator can take it before its first await."""
        return self._starts.claim(resolved, vcpus=vcpus, memory_mb=memory_mb,
                                  disk_mb=disk_mb, network=network)

    def release(self, sandbox_id: str) -> None:
        """Give back a claim whose create was refused before it started."""
        self._starts.release(sandbox_id)

    async def start(self, spec: SandboxSpec, resolved: Resolved) -> SandboxEndpoint:
        """The new sandbox: handed out restored, else restored from the template's start
        snapshot, else booted."""
        return await self._starts.start(spec, resolved)

    async def _find(self, template_id: str, digest: str) -> StartSnapshot | None:
        return (await self._loaded()).get((template_id, digest))

    def _peek(self, template_id: str, digest: str) -> StartSnapshot | None:
        return (self._known or {}).get((template_id, digest))

    async def close(self) -> None:
        """Destroy the sandboxes restored ahead (snapshots stay for the next start)."""
        await self._starts.pool.close()

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
        await self._starts.drain(found.template_id, found.digest)
        backend = self._checkpointable()
        if backend is not None:
            await backend.delete_checkpoint(found.checkpoint_id)  # idempotent
        await asyncio.to_thread(self._records.remove, found.template_id, found.digest)
        if self._peek(found.template_id, found.digest) is found:
            del (self._known or {})[(found.template_id, found.digest)]

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

    async def size_of(self, template_id: str, digest: str) -> int | None:
        """Disk used by the start snapshot of this build's digest, if it has one."""
        return getattr(await self._find(template_id, digest), "size_bytes", None)


async def _shielded(cleanup: Coroutine[Any, Any, None]) -> None:
    """Run cleanup to its end even if the caller is cancelled meanwhile; a failed cleanup
    is logged, never raised over what caused it."""
    task = asyncio.ensure_future(cleanup)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})
        raise
    except Exception:
        log.exception("cleaning up after a start snapshot")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB on disk"
