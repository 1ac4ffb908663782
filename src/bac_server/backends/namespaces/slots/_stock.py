"""Slots laid out ahead of the restores that need them.

A create restored from a template's start snapshot pays on its path for its slot's
files: the slot's directories, its disk (the seeded image copied, then mounted through a
loop device), its overlay root mounted, its network namespace pinned: some 10 ms of the
server's CPU each, mostly in mount(2), which in a burst of creates is the largest part
of the server's share. The stock lays such slots out while the server is quiet, each
exactly as a restore would (``lay_out`` under a placeholder hostname, then
``pin_netns``), for the layouts of the start snapshots taken or restored last (``want``:
at most ``MAX_LAYOUTS``, the least recently used one's slots go to make room). A restore
takes one of its layout (``take``) or, none left, lays its own out as before; a start
snapshot deleted takes its layouts' slots with it (``drain``). Refilling waits until no
slot was taken for ``QUIET_S``: a burst's creates never compete with it for the CPU.

A stocked slot is a CREATING slot on disk whose record names this process: a killed
server's are torn down by the next start's recovery, as any create it cut short; the
backend's close tears the stock's down. Its resources (vcpus, memory) are the taker's
to set, its hostname the taker's to write (``write_identity``).

SECURITY: nothing ever ran in a stocked slot, and it goes to one sandbox only; its veth
reaches nothing until the sandbox's egress policy is installed, as any new slot's.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bac_server.cancel_safe import cancel_and_wait

from ._context import Context
from ._launch import lay_out, lay_out_with_netns, new_record
from ._ocispec import Limits
from ._record import SlotRecord
from ._restorable import pin_netns
from ._teardown import undo_after_failure

_log = logging.getLogger(__name__)

QUIET_S = 1.0  # no take for this long before the stock is refilled
MAX_LAYOUTS = 2  # layouts kept stocked at once
_TRIES = 3  # failures in a row before a layout is given up (until it is wanted again)
HOSTNAME = "sandbox"  # until the taker writes its own


@dataclass(frozen=True)
class Layout:
    """What a stocked slot shares with the restore it may serve."""

    checkpoint_id: str  # the start snapshot restored in it
    template_id: str
    layers: tuple[Path, ...]  # topmost first
    envd_bundle: str
    disk_mb: int
    seeded: Path  # the image its disk is a copy of (``SeedImage``)


class SlotStock:
    def __init__(self, ctx: Context, *, size: int, limits: Limits) -> None:
        """``size``: slots kept per layout; ``limits``: the resources recorded until a
        taker sets its own."""
        self._ctx = ctx
        self._size = size
        self._limits = limits
        self._ready: collections.OrderedDict[Layout, collections.deque[SlotRecord]] = \
            collections.OrderedDict()
        self._failures: dict[Layout, int] = {}
        self._wanted = asyncio.Event()
        self._last_take = 0.0
        self._task: asyncio.Task[None] | None = None
        self._teardowns: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._size > 0 and self._task is None:
            self._task = asyncio.create_task(self._refill_forever(),
                                             name="bac-slot-stock")

    def want(self, layout: Layout) -> None:
        """Keep ``layout`` stocked (it is the most recently used now)."""
        if self._size <= 0:
            return
        self._failures.pop(layout, None)
        if layout in self._ready:
            self._ready.move_to_end(layout)
        else:
            self._ready[layout] = collections.deque()
            while len(self._ready) > MAX_LAYOUTS:
                _oldest, records = self._ready.popitem(last=False)
                for record in records:
                    self._tear_down(record)
        self._wanted.set()

    def take(self, layout: Layout) -> SlotRecord | None:
        """A laid-out slot of ``layout`` (its network namespace pinned at ``netns_pin``),
        now the caller's; None when there is none."""
        self._last_take = time.monotonic()
        queue = self._ready.get(layout)
        return queue.popleft() if queue else None

    async def drain(self, checkpoint_id: str) -> None:
        """Tear down the slots laid out for restores of the checkpoint (being deleted),
        and stop laying them out until it is wanted again."""
        for layout in [k for k in self._ready if k.checkpoint_id == checkpoint_id]:
            for record in self._ready.pop(layout):
                self._tear_down(record)
        if self._teardowns:
            await asyncio.gather(*self._teardowns, return_exceptions=True)

    async def close(self) -> None:
        """Stop refilling; every slot of the stock is torn down."""
        await cancel_and_wait(self._task)
        self._task = None
        ready, self._ready = self._ready, collections.OrderedDict()
        for records in ready.values():
            for record in records:
                self._tear_down(record)
        if self._teardowns:
            await asyncio.gather(*self._teardowns, return_exceptions=True)

    def _tear_down(self, record: SlotRecord) -> None:
        task = asyncio.create_task(undo_after_failure(self._ctx, record))
        self._teardowns.add(task)
        task.add_done_callback(self._teardowns.discard)

    def _short(self) -> Layout | None:
        """The most recently used layout that lacks slots (and has not failed too often)."""
        for layout in reversed(self._ready):
            if len(self._ready[layout]) < self._size and \
                    self._failures.get(layout, 0) < _TRIES:
                return layout
        return None

    async def _refill_forever(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            while (layout := self._short()) is not None:
                quiet = time.monotonic() - self._last_take
                if quiet < QUIET_S:
                    await asyncio.sleep(QUIET_S - quiet)
                    continue
                try:
                    record = await self._make_one(layout)
                except Exception:  # the address pool full, a layer gone...: creates go on
                    self._failures[layout] = self._failures.get(layout, 0) + 1
                    _log.warning("slot stock: laying a slot of %s out failed",
                                 layout.template_id, exc_info=True)
                    continue
                queue = self._ready.get(layout)
                if queue is None:  # no longer wanted meanwhile
                    self._tear_down(record)
                else:
                    self._failures.pop(layout, None)
                    queue.append(record)

    async def _make_one(self, layout: Layout) -> SlotRecord:
        ctx = self._ctx
        record = new_record(ctx, kind="s", template_id=layout.template_id,
                            layers=layout.layers, envd_bundle=layout.envd_bundle,
                            limits=self._limits, disk_mb=layout.disk_mb)
        paths = ctx.paths(record.slot)
        try:
            made = await lay_out_with_netns(
                ctx, record,
                lambda: lay_out(ctx, record, layout.layers, HOSTNAME, seeded=layout.seeded))
            try:
                pin_netns(paths, made)
            finally:
                os.close(made)
        except BaseException:
            await undo_after_failure(ctx, record)
            raise
        return record
