"""``ReadyPool``: slots started ahead per hot image, handed out on create.

A pooled slot has envd listening (optionally with its RPC stack imported), default
resources at a low CPU weight, a placeholder hostname, no token, no environment and no
network policy. ``create`` hands one out when one fits the request (``assign``: the
requested id as hostname, the requested limits, its egress policy, then envd's ``/init``
with the token and environment), so a pooled sandbox is indistinguishable from a cold
one; otherwise, or when the hand-out fails, it starts the sandbox cold. Either way the
image is then hot: the pool keeps ``size`` slots of it started.

A slot fits a create when its ``PoolKey`` is the request's: the same layers and the same
setuid policy (what the runtime was started with); the resources are the request's own,
applied at hand-out. Refills run one at a time per key in the background, a few starts at
once (one per CPU), so they never compete with the creates they serve for more than one
start's worth of CPU.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bac_server.backends.base import (
    SandboxEndpoint,
    SandboxSetupError,
    SandboxSpec,
    TemplateImage,
)

from ..slots import (
    Limits,
    SlotRecord,
    SlotTable,
    assign,
    boot,
    is_alive,
    start_slot,
    undo_after_failure,
    validate,
)

_log = logging.getLogger(__name__)
POOL_HOSTNAME = "sandbox"
# Starts are mostly CPU (the runtime, then envd's imports): one per CPU fills fastest.
_PARALLEL_STARTS = max(1, min(4, os.cpu_count() or 1))
# How long closing waits for starts in flight to unwind and pooled slots to go; what is
# left then (a runtime that hangs) the next start's recovery removes.
CLOSE_BOUND_S = 45.0


@dataclass(frozen=True)
class PoolKey:
    """What a started slot must share with a create to be handed to it."""

    layers: tuple[Path, ...]
    allow_setuid: bool

    @classmethod
    def of(cls, template: TemplateImage) -> PoolKey:
        return cls(template.layer_stack, template.allow_setuid)


class ReadyPool:
    def __init__(self, slots: SlotTable, *, size: int, limits: Limits, preload: bool) -> None:
        # ``limits``: what pooled slots start with (default resources, background weight).
        self._slots = slots
        self._ctx = slots.ctx
        self.size = size
        self._limits = limits
        self._preload = preload
        self._ready: dict[PoolKey, collections.deque[SlotRecord]] = {}
        self._refills: dict[PoolKey, asyncio.Task[None]] = {}
        self._templates: dict[PoolKey, TemplateImage] = {}
        self._closed = False
        self._cleanups: set[asyncio.Future[None]] = set()

    async def create(self, spec: SandboxSpec) -> SandboxEndpoint:
        """The sandbox ``spec`` asks for: a pooled slot handed out, else a cold start."""
        ctx = self._ctx
        limits = validate(ctx.config, spec, ctx.cgroups.supports_swap)
        key = PoolKey.of(spec.template)

        async def make() -> SlotRecord:
            try:
                record = self._take(key)
                if record is not None:
                    try:
                        await assign(ctx, record, spec, limits)
                        return record
                    except SandboxSetupError:
                        _log.warning("pooled slot %s failed at hand-out; starting cold",
                                     record.slot, exc_info=True)
                return await boot(ctx, spec, limits)
            finally:
                self.want(spec.template)  # refill (if pooling) after the hand-out

        return await self._slots.start(spec.sandbox_id, make)

    def _take(self, key: PoolKey) -> SlotRecord | None:
        """A live pooled slot of ``key``, or None; dead ones found on the way go."""
        if self._closed:
            return None
        queue = self._ready.setdefault(key, collections.deque())
        while queue:
            candidate = queue.popleft()
            if is_alive(candidate.init_pid, candidate.init_start):
                return candidate
            self._cleanups.add(task := asyncio.ensure_future(
                undo_after_failure(self._ctx, candidate)))
            task.add_done_callback(self._cleanups.discard)
        return None

    def want(self, template: TemplateImage) -> None:
        """Mark ``template`` hot: keep ``size`` slots of it started."""
        key = PoolKey.of(template)
        self._templates[key] = template
        if self.size == 0 or self._closed:
            return
        self._ready.setdefault(key, collections.deque())
        task = self._refills.get(key)
        if task is None or task.done():
            self._refills[key] = asyncio.create_task(
                self._refill(key, template), name=f"bac-pool-refill-{template.template_id}")

    def resize(self, size: int) -> None:
        self.size = size
        for key in list(self._ready):
            template = self._templates.get(key)
            if template is not None:
                self.want(template)

    async def wait_full(self, template: TemplateImage) -> None:
        """Wait for the current refill of ``template`` (used by tests and benchmarks)."""
        task = self._refills.get(PoolKey.of(template))
        if task is not None:
            await asyncio.shield(task)

    async def _refill(self, key: PoolKey, template: TemplateImage) -> None:
        """Start slots until the pool is full, a few at a time (one per CPU)."""
        queue = self._ready[key]
        in_flight = 0
        failures = 0

        async def one() -> None:
            nonlocal in_flight, failures
            while not self._closed and failures < 3 and len(queue) + in_flight < self.size:
                in_flight += 1
                try:
                    record = await start_slot(self._ctx, template, hostname=POOL_HOSTNAME,
                                              limits=self._limits, pooled=True,
                                              preload=self._preload)
                except SandboxSetupError:
                    failures += 1  # after 3, creates still work cold; _take retries later
                    _log.exception("warm pool: starting a slot of %s failed",
                                   template.template_id)
                    continue
                finally:
                    in_flight -= 1
                if self._closed:
                    await undo_after_failure(self._ctx, record)
                    return
                queue.append(record)

        # return_exceptions: cancelled (by close), gather would return as soon as the first
        # start has unwound, abandoning the others' teardowns to the loop's end.
        outcomes = await asyncio.gather(*(one() for _ in range(_PARALLEL_STARTS)),
                                        return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                _log.error("warm pool: refilling %s failed", template.template_id,
                           exc_info=outcome)

    async def close(self) -> None:
        """Stop refilling and destroy every pooled slot (they were never handed out).

        Starts in flight are cancelled and each tears its slot down; closing waits for
        that (bounded), so a clean stop leaves no slot behind."""
        self._closed = True
        refills = list(self._refills.values())
        for task in refills:
            task.cancel()
        records = [r for queue in self._ready.values() for r in queue]
        self._ready.clear()
        # Tear-downs of dead candidates started by _take must finish too, or their slots
        # outlive the server until the next start's sweep.
        work = [*refills, *self._cleanups,
                *(asyncio.ensure_future(undo_after_failure(self._ctx, r)) for r in records)]
        if not work:
            return
        _, pending = await asyncio.wait(work, timeout=CLOSE_BOUND_S)
        if pending:
            _log.warning("warm pool: %d slot start(s) or teardown(s) still running after "
                         "%.0f s; the next start removes what they leave", len(pending),
                         CLOSE_BOUND_S)
