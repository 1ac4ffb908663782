"""Find every slot again after a restart, and sweep what crashed operations left behind.

Running and paused sandboxes are re-attached (what a suspend cut short by a crash left
is the suspender's to release). Slots whose owning server process is gone and that were
being created, handed out, pooled or destroyed are torn down.

Other servers (and other backend objects in this process) may be creating sandboxes at
the same moment, so the sweep only removes what is provably orphaned, deciding each item
on a fresh look: a lease whose slot directory is gone and whose server is dead, a veth
with no lease at all, a claim whose slot is gone. Nothing is judged from a snapshot taken
earlier, and nothing belonging to a live server is touched.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from pathlib import Path

from bac_server.host import remove_tree

from ..network import delete_veth, host_links_with_prefix, tcp_hold
from ._context import Context
from ._process import owner_alive
from ._record import SlotPhase, SlotRecord
from ._teardown import teardown

_log = logging.getLogger(__name__)
PENDING_CLAIM = "pending:"
# A slot directory gets its record right after mkdir; one without a record (nor an address
# lease naming it) for this long was left by a crash.
_RECORDLESS_GRACE_S = 600.0
# A bundle is made before the record that names it; one unused for a day is garbage.
_BUNDLE_GRACE_S = 86_400.0


async def recover(ctx: Context, bundles_kept: set[str]) -> dict[str, SlotRecord]:
    """Returns the live sandboxes by id. ``bundles_kept``: envd bundles needed besides
    those of the slots (checkpoints')."""
    attached: dict[str, SlotRecord] = {}
    bundles_in_use: set[str] = set()
    root = ctx.config.sandboxes_dir
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        record = ctx.load(entry.name)
        if record is not None:
            bundles_in_use.add(record.envd_bundle)
        if record is None:
            if _abandoned(ctx, entry):
                _log.warning("removing slot directory without a record: %s", entry)
                remove_tree(entry)
            continue
        if record.phase in (SlotPhase.RUNNING, SlotPhase.PAUSED) and record.sandbox_id \
                and ctx.claimed_slot(record.sandbox_id) == record.slot:
            attached[record.sandbox_id] = record
            continue
        if owner_alive(record.owner):
            continue  # a live server is working on it
        _log.info("tearing down slot %s left in phase %s", record.slot, record.phase.value)
        try:
            await teardown(ctx, record)
        except Exception:
            _log.exception("could not tear down stale slot %s", record.slot)
    await _sweep_addresses(ctx)
    _sweep_claims(ctx)
    _sweep_bundles(ctx, bundles_in_use | bundles_kept)
    return attached


def _abandoned(ctx: Context, entry: Path) -> bool:
    """A slot directory without a record is being laid out, or a crash hit between its
    mkdir and its first record (nothing runs in it yet). The address lease, taken before
    the mkdir, names the server that made it; without one, only age tells."""
    pool = ctx.addresses
    for index in pool.indexes():
        owner = pool.owner(index)
        if owner is not None and owner.slot_dir == str(entry):
            return not owner_alive(owner.server)
    return time.time() - entry.stat().st_mtime > _RECORDLESS_GRACE_S


def _sweep_bundles(ctx: Context, in_use: set[str]) -> None:
    """Old envd bundles (one per envd version) that no slot uses any more."""
    root = ctx.config.bundles_dir
    for bundle in root.iterdir() if root.is_dir() else []:
        age = time.time() - bundle.stat().st_mtime
        if str(bundle) not in in_use and age > _BUNDLE_GRACE_S:
            _log.info("removing unused envd bundle %s", bundle.name)
            remove_tree(bundle)


def _sweep_leases(ctx: Context) -> None:
    pool = ctx.addresses
    for index in pool.indexes():
        owner = pool.owner(index)
        if owner is not None and not Path(owner.slot_dir).exists() \
                and not owner_alive(owner.server):
            pool.release(index, owner.slot_dir)


async def _sweep_addresses(ctx: Context) -> None:
    _sweep_leases(ctx)
    await asyncio.to_thread(tcp_hold.sweep, ctx.addresses)
    pool = ctx.addresses
    for name in await host_links_with_prefix(ctx.config.veth_prefix):
        index = pool.index_of(name)
        # Leases are taken before a veth is made and given back after it is deleted.
        if index is not None and pool.owner(index) is None:
            _log.info("removing orphaned veth %s", name)
            await delete_veth(name)


def _sweep_claims(ctx: Context) -> None:
    claims = ctx.config.claims_dir
    for claim in claims.iterdir() if claims.is_dir() else []:
        try:
            content = claim.read_text()
        except FileNotFoundError:
            continue
        if content.startswith(PENDING_CLAIM):
            stale = not owner_alive(content[len(PENDING_CLAIM):])
        else:
            stale = not content or not (ctx.config.sandboxes_dir / content).exists()
        if stale:
            claim.unlink(missing_ok=True)
            _log.info("removed stale claim %s", claim.name)


async def restore_egress(ctx: Context, records: Iterable[SlotRecord]) -> None:
    """After a restart: each re-attached sandbox gets its saved policy and resolver
    back, and rules of sandboxes that no longer hold an address are removed."""
    for record in records:
        try:
            await ctx.egress.restore(ctx.paths(record.slot).root, record.veth,
                                     record.host_address, record.sandbox_address)
        except Exception:
            # Fail closed: without its rules the sandbox's veth reaches nothing.
            _log.exception("restoring the egress policy of %s failed", record.sandbox_id)
    await ctx.egress.sweep()
