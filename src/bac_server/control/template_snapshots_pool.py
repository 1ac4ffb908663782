"""A small pool of sandboxes already restored from a start snapshot, handed out on create.

A restore saves the service's start-up but is itself a fixed cost well above the
create target (runc, CRIU, the sandbox's mounts, cgroups and network; the raw CRIU restore
of a Python process holding pandas alone takes 0.1-0.3 s here), so a template that serves
creates keeps ``size`` sandboxes restored ahead. Filling starts with the first create
from a template (a template nobody uses holds no memory) and each hand-out triggers a
refill, one restore at a time per template, started a second after the create so it
does not compete for CPU with that sandbox's first commands. At most ``max_templates`` templates
keep a pool; the least recently used one's is destroyed to make room.

A pooled sandbox never changes semantics: it was restored with the resources, disk and
default network policy a create asks for (only an identical request takes it; one with
its own egress policy restores under that policy), under an id generated like any
sandbox's, which becomes the created sandbox's id (and already is its hostname). Hand-out
applies the rest exactly as a restore's ``/init`` does: envd's token, env vars, user and
working directory. Its service sat idle since its restore, as it would have in a snapshot.

Claims are synchronous (the creator picks the id before its first await); a claim that is
never started (``release``) goes back to the pool, and one left claimed for
``CLAIM_TTL_S`` (its create failed in between) is destroyed at the next refill.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bac_server.backends.base import SandboxEndpoint, SandboxSpec, TemplateImage
from bac_server.control.tokens import new_access_token, new_sandbox_id

log = logging.getLogger(__name__)
CLAIM_TTL_S = 60.0
REFILL_DELAY_S = 1.0  # after a create, before the refill's restore starts


@dataclass(frozen=True)
class PoolKey:
    """What makes two creates interchangeable: the snapshot and the resources."""

    template_id: str
    digest: str
    vcpus: int
    memory_mb: int
    disk_mb: int


@dataclass(frozen=True)
class Pooled:
    key: PoolKey
    sandbox_id: str
    token: str  # the envd token it was restored with (what /init must present)
    endpoint: SandboxEndpoint


Restore = Callable[[SandboxSpec], Awaitable[SandboxEndpoint]]
Destroy = Callable[[str], Awaitable[None]]


class RestoredPool:
    def __init__(self, *, size: int, destroy: Destroy, max_templates: int = 8,
                 refill_delay_s: float = REFILL_DELAY_S) -> None:
        self.size = size
        self.refill_delay_s = refill_delay_s
        self._destroy = destroy
        self._max_templates = max_templates
        self._ready: collections.OrderedDict[PoolKey, collections.deque[Pooled]] = \
            collections.OrderedDict()
        self._claimed: dict[str, tuple[Pooled, float]] = {}
        self._refills: dict[PoolKey, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    def claim(self, key: PoolKey) -> str | None:
        """The id of a sandbox restored for ``key``, now reserved; None when none is."""
        queue = self._ready.get(key)
        if not queue or self._closed:
            return None
        pooled = queue.popleft()
        self._claimed[pooled.sandbox_id] = (pooled, time.monotonic())
        self._ready.move_to_end(key)
        return pooled.sandbox_id

    def release(self, sandbox_id: str) -> None:
        """A claimed sandbox goes back unused (its create was refused before it began)."""
        found = self._claimed.pop(sandbox_id, None)
        if found is not None and not self._closed:
            self._ready.setdefault(found[0].key, collections.deque()).appendleft(found[0])

    def take(self, sandbox_id: str) -> Pooled | None:
        """The claimed sandbox the create of ``sandbox_id`` now owns, if it is one."""
        found = self._claimed.pop(sandbox_id, None)
        return None if found is None else found[0]

    def want(self, key: PoolKey, image: TemplateImage, restore: Restore) -> None:
        """Keep ``size`` sandboxes of ``key`` restored (``restore`` makes one)."""
        if self.size <= 0 or self._closed:
            return
        if key not in self._ready:
            self._ready[key] = collections.deque()
            while len(self._ready) > self._max_templates:
                oldest = next(iter(self._ready))
                self._spawn(self.drain(oldest.__eq__))
        self._ready.move_to_end(key)
        task = self._refills.get(key)
        if task is None or task.done():
            self._refills[key] = asyncio.create_task(self._refill(key, image, restore),
                                                     name=f"bac-start-pool-{key.template_id}")

    async def _refill(self, key: PoolKey, image: TemplateImage, restore: Restore) -> None:
        # Not a synchronisation: a restore takes both CPUs of a small host for a moment,
        # and the create that triggered it is about to run its first commands.
        await asyncio.sleep(self.refill_delay_s)
        await self._expire_claims()
        while not self._closed and key in self._ready and len(self._ready[key]) < self.size:
            spec = SandboxSpec(sandbox_id=new_sandbox_id(), template=image, vcpus=key.vcpus,
                               memory_mb=key.memory_mb, disk_mb=key.disk_mb,
                               envd_access_token=new_access_token())
            try:
                endpoint = await restore(spec)
            except Exception as exc:
                log.warning("start snapshot pool of template %s: restoring failed, its "
                            "creates restore on demand: %s", key.template_id, exc)
                return
            assert spec.envd_access_token is not None
            pooled = Pooled(key, spec.sandbox_id, spec.envd_access_token, endpoint)
            queue = self._ready.get(key)
            if queue is None or self._closed:  # drained meanwhile
                await self._destroy(pooled.sandbox_id)
                return
            queue.append(pooled)

    async def _expire_claims(self) -> None:
        now = time.monotonic()
        for sandbox_id, (_pooled, at) in list(self._claimed.items()):
            if now - at > CLAIM_TTL_S:
                del self._claimed[sandbox_id]
                await self._quiet_destroy(sandbox_id)

    async def drain(self, which: Callable[[PoolKey], bool]) -> None:
        """Destroy the pooled sandboxes of every key ``which`` selects."""
        for key in [k for k in self._ready if which(k)]:
            task = self._refills.pop(key, None)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            for pooled in self._ready.pop(key, collections.deque()):
                await self._quiet_destroy(pooled.sandbox_id)

    async def close(self) -> None:
        """Destroy every pooled sandbox (at shut-down: nobody would hand them out)."""
        self._closed = True
        await self.drain(lambda _key: True)
        for sandbox_id in list(self._claimed):
            del self._claimed[sandbox_id]
            await self._quiet_destroy(sandbox_id)
        for task in list(self._background):
            with contextlib.suppress(Exception):
                await task

    async def _quiet_destroy(self, sandbox_id: str) -> None:
        try:
            await self._destroy(sandbox_id)
        except Exception:
            log.exception("destroying pooled sandbox %s", sandbox_id)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
