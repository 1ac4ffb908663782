"""Taking a template's start snapshot: a sandbox booted for it, ready, checkpointed.

The sandbox is internal: an id of its own (``snap`` and random hex, never handed to
anyone), the caller's token, the build's resources, booted cold (a slot from the pool
would serve no one, and none is kept for it). Its create returns once envd's supervisor
reported the start command ready, or after the supervisor's own bound; the template's
ready command is then run inside until it succeeds (``backends.envd_ready``: a snapshot
must not be taken of a service that is not ready). It is checkpointed with its memory
and destroyed whatever happened, so only the checkpoint outlives the call.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets

from bac_server.backends.base import CheckpointInfo, SandboxSpec, TemplateImage
from bac_server.backends.envd_ready import wait_until_ready

from ..checkpoint import Checkpointer
from ..slots import SlotTable

_log = logging.getLogger(__name__)


async def take_start_snapshot(slots: SlotTable, checkpointer: Checkpointer,
                              image: TemplateImage, checkpoint_id: str, *, token: str,
                              vcpus: int, memory_mb: int, ready_cmd: str | None,
                              ready_bound_s: float, disk_mb: int) -> CheckpointInfo:
    """See ``backends.base.StartSnapshotter.take_start_snapshot``. Once taken, slots are
    laid out ahead for its copies on disks of ``disk_mb`` (``Checkpointer.stock``): the
    snapshot is of a template in use or just built, and a burst of creates may come before
    any restore (a failure there costs only speed)."""
    spec = SandboxSpec(sandbox_id="snap" + secrets.token_hex(8),
                       template=dataclasses.replace(image, start_snapshot=None), vcpus=vcpus,
                       memory_mb=memory_mb, envd_access_token=token)
    # Nobody waits on it: the sandboxes in use get the CPUs first (the weight is not part
    # of the checkpoint; each sandbox restored from it gets its own create's).
    endpoint = await slots.boot(spec, background=True)
    try:
        if ready_cmd is not None:
            await wait_until_ready(endpoint, token=token, user=image.default_user,
                                   cwd=image.default_workdir, ready_cmd=ready_cmd,
                                   bound_s=ready_bound_s)
        info = await checkpointer.checkpoint(spec.sandbox_id, checkpoint_id, memory=True)
    finally:
        try:
            await slots.destroy(spec.sandbox_id)  # runs to its end even when cancelled
        except Exception:
            _log.exception("destroying the start snapshot's sandbox %s", spec.sandbox_id)
    try:
        await checkpointer.stock(checkpoint_id, image, disk_mb)
    except Exception:
        _log.warning("laying slots out ahead for start snapshot %s failed", checkpoint_id,
                     exc_info=True)
    return info
