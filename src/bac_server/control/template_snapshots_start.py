"""Creating a sandbox from a start snapshot: a pooled restored sandbox, else a restore,
else a boot — each step falling back to the next, never returning a half-made sandbox.

The creator asks first (``claim``, synchronous: before its first await) whether a sandbox
restored ahead (``template_snapshots_pool``) fits the request; if so the new sandbox gets
that sandbox's id. ``start`` then hands the claimed one out (envd's ``/init``), or
restores the snapshot under the new id with its own token, env vars, network and limits
(``create_from``), or boots (``create``). A step that fails destroys
what it made (destroy is idempotent) and logs a warning before the next is tried.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from bac_server.backends.base import (
    Backend,
    Checkpointable,
    CheckpointNotFound,
    SandboxEndpoint,
    SandboxSpec,
)
from bac_server.backends.egress import EgressPolicy
from bac_server.control.template_snapshots_envd import reinit
from bac_server.control.template_snapshots_pool import Pooled, PoolKey, RestoredPool
from bac_server.control.template_snapshots_records import StartSnapshot
from bac_server.control.templates_resolve import Resolved

log = logging.getLogger(__name__)

Find = Callable[[str, str], Awaitable[StartSnapshot | None]]
Peek = Callable[[str, str], StartSnapshot | None]
Drop = Callable[[StartSnapshot], Awaitable[None]]


class SnapshotStarts:
    def __init__(self, *, backend: Backend, pool_size: int, find: Find, peek: Peek,
                 drop: Drop) -> None:
        self._backend = backend
        self._find, self._peek, self._drop = find, peek, drop
        self.pool = RestoredPool(size=pool_size, destroy=backend.destroy)

    def _checkpointable(self) -> Checkpointable | None:
        backend = self._backend
        if isinstance(backend, Checkpointable) and backend.memory_checkpoints:
            return backend
        return None

    def claim(self, resolved: Resolved, *, vcpus: int, memory_mb: int, disk_mb: int,
              network: EgressPolicy) -> str | None:
        """The id of a restored sandbox reserved for this create, if one fits it."""
        if resolved.template_id is None or resolved.digest is None:
            return None
        if network != EgressPolicy():
            # Pooled sandboxes run with the default policy; one with its own restores
            # under it from the start (no window with a wider one).
            return None
        return self.pool.claim(PoolKey(resolved.template_id, resolved.digest, vcpus,
                                       memory_mb, disk_mb))

    def release(self, sandbox_id: str) -> None:
        self.pool.release(sandbox_id)

    async def start(self, spec: SandboxSpec, resolved: Resolved) -> SandboxEndpoint:
        backend = self._checkpointable()
        pooled = self.pool.take(spec.sandbox_id)
        if pooled is not None:
            try:
                return await self._hand_out(pooled, spec)
            except Exception as exc:
                log.warning("sandbox %s: handing out a restored sandbox failed, restoring "
                            "anew: %s", spec.sandbox_id, exc)
                await self._quiet_destroy(spec.sandbox_id)
        if backend is None or resolved.template_id is None or resolved.digest is None:
            return await self._backend.create(spec)
        found = await self._find(resolved.template_id, resolved.digest)
        if found is None:
            return await self._backend.create(spec)
        try:
            endpoint = await backend.create_from(spec, found.checkpoint_id,
                                                 source_token=found.token)
        except Exception as exc:
            log.warning("sandbox %s: restoring the start snapshot of template %s failed, "
                        "booting it instead: %s", spec.sandbox_id, found.template_id, exc)
            await self._quiet_destroy(spec.sandbox_id)
            if isinstance(exc, CheckpointNotFound):
                await self._drop(found)
            return await self._backend.create(spec)
        self._keep_warm(backend, found, spec)
        return endpoint

    async def _hand_out(self, pooled: Pooled, spec: SandboxSpec) -> SandboxEndpoint:
        await reinit(pooled.endpoint, spec, current_token=pooled.token)
        backend = self._checkpointable()
        found = self._peek(pooled.key.template_id, pooled.key.digest)
        if backend is not None and found is not None:
            self._keep_warm(backend, found, spec)
        return pooled.endpoint

    def _keep_warm(self, backend: Checkpointable, found: StartSnapshot,
                   spec: SandboxSpec) -> None:
        """Keep sandboxes like ``spec`` restored ahead (from now on)."""
        key = PoolKey(found.template_id, found.digest, spec.vcpus, spec.memory_mb,
                      spec.disk_mb)

        async def restore(ahead: SandboxSpec) -> SandboxEndpoint:
            return await backend.create_from(ahead, found.checkpoint_id,
                                             source_token=found.token)

        self.pool.want(key, spec.template, restore)

    async def drain(self, template_id: str, digest: str | None = None) -> None:
        """Destroy the restored sandboxes of a template (of one digest, when given)."""
        await self.pool.drain(lambda key: key.template_id == template_id and
                              digest in (None, key.digest))

    async def _quiet_destroy(self, sandbox_id: str) -> None:
        with contextlib.suppress(Exception):
            await self._backend.destroy(sandbox_id)  # idempotent; fails closed
