"""``ReadyPool``: slots made ahead, booted or restored from a start snapshot, handed out on
create; and the create itself, which makes the sandbox the way the pool would on a miss.

**The key** (``PoolKey``) is what a made-ahead slot shares with the creates it may serve:
the layers and setuid policy the runtime was started with, the size of its disk (a file
system of that size, ``slots._disk``: it cannot grow under a running sandbox) and, for a
slot restored from a template's start snapshot, that snapshot and the resources it was
restored with (CRIU brings the memory back into cgroups of that size). A booted slot runs default
resources at a low CPU weight, and a hand-out applies the request's own; a restored one
serves only a create of its exact shape with the default egress policy (one asking for
its own policy restores under it): it waits under that policy, so its hand-out need not
install one.

**Filling.** A key is wanted by the create that used it (and a booted one by ``want``:
the hot templates warmed at start-up), so an image nobody creates from holds nothing.
Each key has one refill at a time in the background: booted slots ``size`` per key
(``BAC_POOL_SIZE``), a few starts at once (one per CPU), three failures before it waits
for the next create; restored slots ``restored_size`` per key
(``BAC_START_SNAPSHOT_POOL``), one restore at a time, a second after the create that
asked (a restore takes both CPUs of a small host for a moment, and the new sandbox is
about to run its first commands), one failure ends the refill. Every slot made ahead
first waits for the creates running to end (at most ``YIELD_MAX_S``): a burst is not
slowed by the refills it sets off, creates one after another leave room between them.
A restored slot's relay CA goes into its trust store while it waits. At most
``MAX_RESTORED_KEYS`` keys keep restored slots, each holding a service's memory; the
least recently used one's go to make room.

**Following demand.** A key that serves creates faster than its size keeps more: its
size becomes the number of creates that asked for it in the last ``demand_window_s``
(``BAC_POOL_DEMAND_WINDOW_S``), at most ``max_size`` (``BAC_POOL_MAX``), so a job that
starts sandboxes in bursts finds its next burst pooled. Once the window has passed with
fewer creates, the slots beyond the size go (``trim``: at the end of each window, and at
each create).

**Pooled slots** have envd listening, a placeholder hostname and no sandbox id. A booted
one has no token and no network policy (nothing of it reaches out before a hand-out); a
restored one's service continues under the default policy, as when its snapshot was
taken and as in the sandbox it becomes, and its envd still holds the token the snapshot
was taken with, the one ``assign`` presents. Both have answered envd's ``/health`` once,
so a hand-out pays neither for envd's imports nor for faulting a restored envd's pages
back in.

**A create** (``create``), under its id's claim: a pooled slot of its key handed out
(``assign``: hostname, limits, egress policy, then envd's ``/init`` with the create's
token and environment), else (a template with a start snapshot whose restored slots
ran out) a booted slot of the same layers, else a restore of the start snapshot, else a
boot;
each step that fails has torn down what it made (fail closed) and the next is tried,
so a pooled sandbox is indistinguishable from a cold one and no half-made one is ever
returned. A restore that fails because the snapshot can never be restored again (its
checkpoint gone, its images cut short) marks the endpoint ``start_snapshot_lost``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bac_server.backends.base import (
    BackendError,
    CreateTiming,
    SandboxEndpoint,
    SandboxSetupError,
    SandboxSpec,
    TemplateImage,
)
from bac_server.backends.egress import EgressPolicy
from bac_server.backends.envd_http import probe_health
from bac_server.cancel_safe import off_loop

from ..checkpoint import Checkpointer
from ..slots import (
    Limits,
    SlotPhase,
    SlotRecord,
    SlotTable,
    assign,
    boot,
    is_alive,
    save_record,
    start_slot,
    trust_relay_ahead,
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
REFILL_DELAY_S = 1.0  # after a create, before a restored slot's refill starts
YIELD_MAX_S = 1.0  # how long a refill waits for the creates running to end, each slot
MAX_RESTORED_KEYS = 8
DEMAND_WINDOW_S = 120.0


@dataclass(frozen=True)
class PoolKey:
    """What a made-ahead slot must share with a create to be handed to it."""

    layers: tuple[Path, ...]
    allow_setuid: bool
    disk_mb: int
    # The start snapshot (checkpoint id) its slots are restored from; None: booted.
    snapshot: str | None = None
    # Restored slots only: the resources they were restored with.
    limits: Limits | None = None

    @classmethod
    def booted(cls, template: TemplateImage, disk_mb: int) -> PoolKey:
        return cls(template.layer_stack, template.allow_setuid, disk_mb)


@dataclass(frozen=True)
class _Pooled:
    record: SlotRecord
    token: str | None  # what envd holds now (a restored slot's snapshot token), for /init
    egress_attached: bool  # already under the default policy (restored ones)
    relay_trusted: bool = False  # its relay CA in its trust store already (restored ones)


@dataclass(frozen=True)
class _Fill:
    """How one kind of key is kept full."""

    size: int
    parallel: int
    delay_s: float
    tries: int


class ReadyPool:
    def __init__(self, slots: SlotTable, checkpointer: Checkpointer, *, size: int,
                 restored_size: int, limits: Limits, preload: bool, disk_mb: int,
                 max_size: int = 0, demand_window_s: float = DEMAND_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # ``limits``: what booted slots start with (default resources, background weight);
        # ``disk_mb``: the disk of the slots ``want`` keeps (the creates' default).
        self._slots = slots
        self._ctx = slots.ctx
        self._checkpointer = checkpointer
        self.size = size
        self.restored_size = restored_size
        # Following demand: at most this many per key (0 or below a base size: off).
        self.max_size = max_size
        self._window_s = demand_window_s
        self._clock = clock
        self._demand: dict[PoolKey, collections.deque[float]] = {}
        self._trims: dict[PoolKey, asyncio.TimerHandle] = {}
        self._limits = limits
        self._preload = preload
        self._disk_mb = disk_mb
        self._ready: collections.OrderedDict[PoolKey, collections.deque[_Pooled]] = \
            collections.OrderedDict()
        self._refills: dict[PoolKey, asyncio.Task[None]] = {}
        self._templates: dict[PoolKey, TemplateImage] = {}
        self._closed = False
        self._cleanups: set[asyncio.Future[None]] = set()
        self._creating = 0  # creates running now (see _yield_to_creates)
        self._no_create = asyncio.Event()
        self._no_create.set()

    # -- a create ---------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> SandboxEndpoint:
        """The sandbox ``spec`` asks for: handed out from the pool, else restored from its
        template's start snapshot, else booted."""
        ctx = self._ctx
        limits = validate(ctx.config, spec, ctx.cgroups.supports_swap)
        key = self._key_of(spec, limits)
        self._asked(key)
        lost = False
        parts: dict[str, float] = {}
        began = time.perf_counter()

        def part(name: str, since: float) -> None:
            parts[name] = round((time.perf_counter() - since) * 1000, 3)

        async def make() -> SlotRecord:
            nonlocal lost
            used = key
            try:
                pooled = self._take(key) if key.snapshot is None or \
                    spec.network == EgressPolicy() else None
                if pooled is None and key.snapshot is not None:
                    # A booted slot of the same layers serves any create: envd in it has
                    # answered already, so it is as quick to hand out as a restored one.
                    booted_key = PoolKey.booted(spec.template, spec.disk_mb)
                    pooled = self._take(booted_key)
                    if pooled is not None:
                        self._want(booted_key, _booted(spec.template))
                if pooled is not None:
                    step = time.perf_counter()
                    try:
                        await assign(ctx, pooled.record, spec, limits,
                                     current_token=pooled.token,
                                     egress_attached=pooled.egress_attached,
                                     relay_trusted=pooled.relay_trusted)
                        part("handout", step)
                        return pooled.record
                    except SandboxSetupError:
                        part("handout", step)
                        _log.warning("pooled slot %s failed at hand-out; making sandbox %s "
                                     "anew", pooled.record.slot, spec.sandbox_id,
                                     exc_info=True)
                ref = spec.template.start_snapshot
                if key.snapshot is not None and ref is not None:
                    step = time.perf_counter()
                    try:
                        restored = await self._checkpointer.copy(spec, key.snapshot,
                                                                 source_token=ref.token,
                                                                 often=True)
                        part("restore", step)
                        return restored
                    except Exception as exc:
                        part("restore", step)
                        lost = not await self._checkpointer.intact(key.snapshot)
                        _log.warning("sandbox %s: restoring the start snapshot of template "
                                     "%s failed, booting it instead: %s", spec.sandbox_id,
                                     spec.template.template_id, exc)
                        used = PoolKey.booted(spec.template, spec.disk_mb)
                step = time.perf_counter()
                booted = await boot(ctx, spec, limits)
                part("boot", step)
                return booted
            finally:
                self._want(used, spec.template)  # refill (if pooling) after the hand-out

        self._creating += 1
        self._no_create.clear()
        try:
            endpoint = await self._slots.start(spec.sandbox_id, make)
        finally:
            self._creating -= 1
            if self._creating == 0:
                self._no_create.set()
        how = {"handout": "pool", "restore": "start_snapshot", "boot": "boot"}[
            next(reversed(parts))]
        timing = CreateTiming(how, round((time.perf_counter() - began) * 1000, 3), parts)
        return dataclasses.replace(endpoint, start_snapshot_lost=lost, timing=timing)

    def _key_of(self, spec: SandboxSpec, limits: Limits) -> PoolKey:
        ref = spec.template.start_snapshot
        if ref is None or not self._checkpointer.memory_checkpoints:
            return PoolKey.booted(spec.template, spec.disk_mb)
        return PoolKey(spec.template.layer_stack, spec.template.allow_setuid, spec.disk_mb,
                       ref.checkpoint_id, limits)

    def _take(self, key: PoolKey) -> _Pooled | None:
        """A live pooled slot of ``key``, or None; dead ones found on the way go."""
        queue = self._ready.get(key)
        if self._closed or queue is None:
            return None
        self._ready.move_to_end(key)
        while queue:
            candidate = queue.popleft()
            if is_alive(candidate.record.init_pid, candidate.record.init_start):
                return candidate
            self._cleanups.add(task := asyncio.ensure_future(
                undo_after_failure(self._ctx, candidate.record)))
            task.add_done_callback(self._cleanups.discard)
        return None

    # -- filling ----------------------------------------------------------------------

    def want(self, template: TemplateImage) -> None:
        """Mark ``template`` hot: keep ``size`` slots of it booted, with disks of the
        default size (other sizes are kept once a create asks for one)."""
        self._want(PoolKey.booted(template, self._disk_mb), template)

    def _fill_of(self, key: PoolKey) -> _Fill:
        if key.snapshot is None:
            return _Fill(self._size_of(key, self.size), _PARALLEL_STARTS, 0.0, 3)
        return _Fill(self._size_of(key, self.restored_size), 1, REFILL_DELAY_S, 1)

    # -- following demand ---------------------------------------------------------------

    def _asked(self, key: PoolKey) -> None:
        """Count a create of ``key`` (see the module's *Following demand*)."""
        if self.max_size <= 0:
            return
        self._demand.setdefault(key, collections.deque()).append(self._clock())
        if key not in self._trims and not self._closed:
            self._trims[key] = asyncio.get_running_loop().call_later(
                self._window_s, self._trim_later, key)

    def _size_of(self, key: PoolKey, base: int) -> int:
        """How many slots ``key`` keeps now: ``base``, or the creates of the last window
        (at most ``max_size``). A key whose base is 0 keeps none: pooling is off."""
        demand = self._demand.get(key)
        if base == 0 or not demand:
            return base
        horizon = self._clock() - self._window_s
        while demand and demand[0] <= horizon:
            demand.popleft()
        if not demand:
            del self._demand[key]
        return max(base, min(self.max_size, len(demand)))

    def _trim_later(self, key: PoolKey) -> None:
        self._trims.pop(key, None)
        self.trim(key)
        if key in self._demand and not self._closed:  # creates since: look again later
            self._trims[key] = asyncio.get_running_loop().call_later(
                self._window_s, self._trim_later, key)

    def trim(self, key: PoolKey) -> None:
        """Destroy the slots of ``key`` beyond its size now (the burst that grew it is
        over), in the background."""
        for pooled in self._surplus(key):
            self._spawn(undo_after_failure(self._ctx, pooled.record))

    def _surplus(self, key: PoolKey) -> list[_Pooled]:
        queue = self._ready.get(key)
        if queue is None:
            return []
        return [queue.pop() for _ in range(max(0, len(queue) - self._fill_of(key).size))]

    async def forget_demand(self) -> int:
        """As if every demand window had passed: sizes back to their base, the slots
        beyond destroyed before this returns (``testing.forget_demand``); how many."""
        self._demand.clear()
        surplus = [p for key in list(self._ready) for p in self._surplus(key)]
        await asyncio.gather(*(undo_after_failure(self._ctx, p.record) for p in surplus))
        return len(surplus)

    def _want(self, key: PoolKey, template: TemplateImage) -> None:
        self._templates[key] = template
        self.trim(key)
        if self._fill_of(key).size == 0 or self._closed:
            return
        if key not in self._ready:
            self._ready[key] = collections.deque()
            restored = [k for k in self._ready if k.snapshot is not None]
            for oldest in restored[:max(0, len(restored) - MAX_RESTORED_KEYS)]:
                self._spawn(self._drain([oldest]))
        self._ready.move_to_end(key)
        task = self._refills.get(key)
        if task is None or task.done():
            self._refills[key] = asyncio.create_task(
                self._refill(key, template), name=f"bac-pool-refill-{template.template_id}")

    def resize(self, size: int) -> None:
        """Change how many booted slots per key are kept."""
        self.size = size
        for key in [k for k in self._ready if k.snapshot is None]:
            template = self._templates.get(key)
            if template is not None:
                self._want(key, template)

    async def wait_full(self, template: TemplateImage) -> None:
        """Wait for the current refills of ``template``'s keys: booted ones, or those
        restored from its start snapshot when it has one (``testing.wait_pool_full``)."""
        ref = template.start_snapshot
        snapshot = None if ref is None else ref.checkpoint_id
        refills = [task for key, task in self._refills.items()
                   if (key.layers, key.allow_setuid, key.snapshot) ==
                   (template.layer_stack, template.allow_setuid, snapshot)]
        await asyncio.gather(*(asyncio.shield(task) for task in refills))

    async def _refill(self, key: PoolKey, template: TemplateImage) -> None:
        """Make slots of ``key`` until it is full (see the module's *Filling*)."""
        fill = self._fill_of(key)
        if fill.delay_s:
            # Not a synchronisation: the create that asked is about to run its first
            # commands, and a restore takes both CPUs of a small host for a moment.
            await asyncio.sleep(fill.delay_s)
        queue = self._ready.get(key)
        if queue is None:
            return
        in_flight = 0
        failures = 0

        async def one() -> None:
            nonlocal in_flight, failures
            while not self._closed and failures < fill.tries and \
                    len(queue) + in_flight < self._fill_of(key).size:
                await self._yield_to_creates()
                if self._closed or len(queue) + in_flight >= self._fill_of(key).size:
                    return
                in_flight += 1
                try:
                    pooled = await self._make_ahead(key, template)
                except (BackendError, OSError):
                    failures += 1  # creates still work without; the next one retries
                    _log.warning("ready pool: making a slot of %s ahead failed",
                                 template.template_id, exc_info=True)
                    continue
                finally:
                    in_flight -= 1
                if self._closed or self._ready.get(key) is not queue:  # drained meanwhile
                    await undo_after_failure(self._ctx, pooled.record)
                    return
                queue.append(pooled)

        # return_exceptions: cancelled (by close), gather would return as soon as the first
        # start has unwound, abandoning the others' teardowns to the loop's end.
        outcomes = await asyncio.gather(*(one() for _ in range(fill.parallel)),
                                        return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                _log.error("ready pool: refilling %s failed", template.template_id,
                           exc_info=outcome)

    async def _yield_to_creates(self) -> None:
        """Before each slot made ahead: wait until no create is running (at most
        ``YIELD_MAX_S``). A burst of creates, each taking a pooled slot, would otherwise
        share the CPUs with the refills it set off, and wait longer for its own sandboxes;
        creates one after another leave gaps between them, and the refill goes on there.
        Not a synchronisation: a refill that waits the bound out goes on anyway."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._no_create.wait(), YIELD_MAX_S)

    async def _make_ahead(self, key: PoolKey, template: TemplateImage) -> _Pooled:
        """One slot of ``key``, POOLED; fails closed."""
        ref = template.start_snapshot
        if key.snapshot is None or key.limits is None or ref is None:
            record = await start_slot(self._ctx, template, hostname=POOL_HOSTNAME,
                                      limits=self._limits, disk_mb=key.disk_mb, pooled=True,
                                      preload=self._preload)
            return _Pooled(record, None, egress_attached=False)
        record = await self._checkpointer.copy_ahead(
            key.snapshot, template, dataclasses.replace(key.limits, background=True),
            hostname=POOL_HOSTNAME, disk_mb=key.disk_mb)
        try:
            await probe_health(record.sandbox_address, self._ctx.config.envd_init_timeout_s)
            await trust_relay_ahead(self._ctx, record, ref.token)
            record.move(SlotPhase.POOLED)  # on disk only once it can be handed out
            await off_loop(lambda: save_record(self._ctx.paths(record.slot), record))
        except BaseException as exc:
            await undo_after_failure(self._ctx, record)
            if not isinstance(exc, Exception):
                raise
            raise SandboxSetupError(f"slot {record.slot} restored ahead: {exc}") from exc
        return _Pooled(record, ref.token, egress_attached=True, relay_trusted=True)

    # -- emptying ---------------------------------------------------------------------

    async def drain(self, checkpoint_id: str) -> None:
        """Destroy the slots restored ahead from the checkpoint, and stop making them."""
        await self._drain([k for k in self._ready if k.snapshot == checkpoint_id])

    async def _drain(self, keys: list[PoolKey]) -> None:
        for key in keys:
            task = self._refills.pop(key, None)
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            self._templates.pop(key, None)
            for pooled in self._ready.pop(key, collections.deque()):
                await undo_after_failure(self._ctx, pooled.record)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def close(self) -> None:
        """Stop refilling and destroy every pooled slot (they were never handed out).

        Starts in flight are cancelled and each tears its slot down; closing waits for
        that (bounded), so a clean stop leaves no slot behind."""
        self._closed = True
        for handle in self._trims.values():
            handle.cancel()
        self._trims.clear()
        refills = list(self._refills.values())
        for task in refills:
            task.cancel()
        records = [p.record for queue in self._ready.values() for p in queue]
        self._ready.clear()
        # Tear-downs of dead candidates started by _take, and drains, must finish too, or
        # their slots outlive the server until the next start's sweep.
        work = [*refills, *self._cleanups,
                *(asyncio.ensure_future(undo_after_failure(self._ctx, r)) for r in records)]
        if not work:
            return
        _, pending = await asyncio.wait(work, timeout=CLOSE_BOUND_S)
        if pending:
            _log.warning("ready pool: %d slot start(s) or teardown(s) still running after "
                         "%.0f s; the next start removes what they leave", len(pending),
                         CLOSE_BOUND_S)


def _booted(template: TemplateImage) -> TemplateImage:
    """The template as its booted slots are made: without its start snapshot."""
    return dataclasses.replace(template, start_snapshot=None)
