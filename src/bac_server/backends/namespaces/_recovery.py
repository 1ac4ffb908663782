"""Find every slot again after a restart, and sweep what crashed operations left behind.

Running and paused sandboxes are re-attached. Slots that were being created, handed out
or destroyed by a server that is gone, and pooled slots of a gone server, are torn down.
Then orphans are swept: leases, claims, host veths, cgroups and runtime containers that
no slot record accounts for.
"""

from __future__ import annotations

import contextlib
import logging
import os

from bac_server.host import PARENT_CGROUP, remove_tree

from ._context import Context
from ._netns import delete_veth, host_links_with_prefix
from ._process import owner_alive
from ._slot import SlotPhase, SlotRecord
from ._teardown import teardown

_log = logging.getLogger(__name__)
PENDING_CLAIM = "pending:"


async def recover(ctx: Context) -> dict[str, SlotRecord]:
    """Returns the live sandboxes by id."""
    attached: dict[str, SlotRecord] = {}
    known_slots: set[str] = set()
    root = ctx.config.sandboxes_dir
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        record = ctx.load(entry.name)
        if record is None:
            _log.warning("removing slot directory without a record: %s", entry)
            remove_tree(entry)
            continue
        known_slots.add(record.slot)
        if record.phase in (SlotPhase.RUNNING, SlotPhase.PAUSED) and record.sandbox_id:
            if ctx.claimed_slot(record.sandbox_id) == record.slot:
                attached[record.sandbox_id] = record
                continue
        elif record.owner != ctx.owner and owner_alive(record.owner):
            continue  # another live server is working on it
        _log.info("tearing down slot %s left in phase %s", record.slot, record.phase.value)
        try:
            await teardown(ctx, record)
            known_slots.discard(record.slot)
        except Exception:
            _log.exception("could not tear down stale slot %s", record.slot)
    await _sweep(ctx, known_slots)
    return attached


async def _sweep(ctx: Context, slots: set[str]) -> None:
    leases = ctx.addresses.leases()
    for index, owner in leases.items():
        if owner not in slots:
            ctx.addresses.release(index)
    live_veths = {ctx.addresses.describe(i).veth for i, o in leases.items() if o in slots}
    for name in await host_links_with_prefix(ctx.config.veth_prefix):
        if name not in live_veths:
            _log.info("removing orphaned veth %s", name)
            await delete_veth(name)
    claims = ctx.config.claims_dir
    for claim in claims.iterdir() if claims.is_dir() else []:
        content = claim.read_text()
        stale_pending = content.startswith(PENDING_CLAIM) and not owner_alive(
            content[len(PENDING_CLAIM):])
        if stale_pending or (content and not content.startswith(PENDING_CLAIM)
                             and content not in slots):
            claim.unlink(missing_ok=True)
    for relative in _child_cgroups(ctx):
        if relative.rsplit("/", 1)[-1] not in slots and not ctx.cgroups.procs(relative):
            with contextlib.suppress(OSError):
                ctx.cgroups.remove(relative)
    state_root = ctx.config.runtime_root
    for entry in state_root.iterdir() if state_root.is_dir() else []:
        if entry.is_dir() and entry.name not in slots:
            _log.info("deleting orphaned runtime container %s", entry.name)
            with contextlib.suppress(Exception):
                await ctx.runtime.delete(entry.name)


def _child_cgroups(ctx: Context) -> list[str]:
    found: set[str] = set()
    for path in ctx.cgroups.dirs(PARENT_CGROUP).values():
        if path.is_dir():
            found.update(f"/{PARENT_CGROUP}/{child.name}" for child in os.scandir(path)
                         if child.is_dir())
    return sorted(found)
