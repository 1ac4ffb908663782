"""The slot-facing side of sandbox networking: resolver file, egress on and off.

Called from the slot life cycle (``_launch``, ``_teardown``, the backend's start-up) so
those modules stay about their own steps; the work is in ``network._egress``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from bac_server.backends.egress import EgressPolicy
from bac_server.host import IdRange

from ._context import Context
from ._slot import SlotPaths, SlotRecord

_log = logging.getLogger(__name__)
RESOLV_CONF = "resolv.conf"


def write_resolv_conf(paths: SlotPaths, host_address: str, ids: IdRange) -> None:
    """The file bound over /etc/resolv.conf: the resolver at the sandbox's gateway."""
    text = f"nameserver {host_address}\noptions edns0 trust-ad\n"
    target = paths.etc / RESOLV_CONF
    # O_NOFOLLOW: the sandbox can write this file (root inside owns it), not replace it.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    try:
        os.write(fd, text.encode())
        os.fchown(fd, ids.root, ids.root)
    finally:
        os.close(fd)


async def attach_egress(ctx: Context, record: SlotRecord, policy: EgressPolicy) -> None:
    await ctx.egress.attach(ctx.paths(record.slot).root, record.veth, record.host_address,
                            record.sandbox_address, policy)


async def detach_egress(ctx: Context, record: SlotRecord, owns_lease: bool) -> None:
    """Remove the sandbox's rules and resolver; only its saved policy file when the
    address lease (and so every name derived from it) is no longer this slot's."""
    root = ctx.paths(record.slot).root
    if owns_lease:
        await ctx.egress.detach(root, record.veth, record.host_address,
                                record.sandbox_address)
    else:
        ctx.egress.forget(root)


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
