"""The warm pool: a few started slots per hot template, handed out on create.

A pooled slot has envd listening (optionally with its RPC stack imported), default
resources, a placeholder hostname, no token and no environment. Hand-out (``assign``)
sets the requested id as hostname, applies the requested limits and then sends ``/init``
with the token and environment, so a pooled sandbox is indistinguishable from a cold one.
Refills run one at a time per template in the background, so they never compete with
the creates they serve for more than one start's worth of CPU.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
from pathlib import Path

from bac_server.backends.base import SandboxSetupError, TemplateImage

from ._context import Context
from ._launch import start_slot
from ._ocispec import Limits
from ._process import is_alive
from ._record import SlotRecord
from ._teardown import undo_after_failure

_log = logging.getLogger(__name__)
POOL_HOSTNAME = "sandbox"
# Starts are mostly CPU (the runtime, then envd's imports): one per CPU fills fastest.
_PARALLEL_STARTS = max(1, min(4, os.cpu_count() or 1))
# How long closing waits for starts in flight to unwind and pooled slots to go; what is
# left then (a runtime that hangs) the next start's recovery removes.
CLOSE_BOUND_S = 45.0


class WarmPool:
    def __init__(self, ctx: Context, size: int, limits: Limits, preload: bool) -> None:
        self._ctx = ctx
        self.size = size
        self._limits = limits
        self._preload = preload
        self._ready: dict[tuple[Path, ...], collections.deque[SlotRecord]] = {}
        self._refills: dict[tuple[Path, ...], asyncio.Task[None]] = {}
        self._templates: dict[tuple[Path, ...], TemplateImage] = {}
        self._closed = False
        self._cleanups: set[asyncio.Future[None]] = set()

    def take(self, template: TemplateImage) -> SlotRecord | None:
        """A live pooled slot for ``template``, or None. The caller calls ``want`` once
        the hand-out is done, so refilling does not compete with it."""
        if self._closed:
            return None
        queue = self._ready.setdefault(template.layer_stack, collections.deque())
        record: SlotRecord | None = None
        while queue:
            candidate = queue.popleft()
            if is_alive(candidate.init_pid, candidate.init_start):
                record = candidate
                break
            self._cleanups.add(task := asyncio.ensure_future(
                undo_after_failure(self._ctx, candidate)))
            task.add_done_callback(self._cleanups.discard)
        return record

    def want(self, template: TemplateImage) -> None:
        """Mark ``template`` hot: keep ``size`` slots of it started."""
        self._templates[template.layer_stack] = template
        if self.size == 0 or self._closed:
            return
        self._ready.setdefault(template.layer_stack, collections.deque())
        task = self._refills.get(template.layer_stack)
        if task is None or task.done():
            self._refills[template.layer_stack] = asyncio.create_task(
                self._refill(template), name=f"bac-pool-refill-{template.template_id}")

    def resize(self, size: int) -> None:
        self.size = size
        for queue_key in list(self._ready):
            template = self._templates.get(queue_key)
            if template is not None:
                self.want(template)

    async def wait_full(self, template: TemplateImage) -> None:
        """Wait for the current refill of ``template`` (used by tests and benchmarks)."""
        task = self._refills.get(template.layer_stack)
        if task is not None:
            await asyncio.shield(task)

    async def _refill(self, template: TemplateImage) -> None:
        """Start slots until the pool is full, a few at a time (one per CPU)."""
        queue = self._ready[template.layer_stack]
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
                    failures += 1  # after 3, creates still work cold; take() retries later
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
        # Tear-downs of dead candidates started by take() must finish too, or their slots
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
