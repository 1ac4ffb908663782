"""Request bodies of the checkpoint, snapshot and fork routes (strict: see
:mod:`bac_server.api.body`)."""

from __future__ import annotations

from pydantic import StrictBool, StrictInt

from bac_server.api.body import Name, Strict


class SnapshotRequest(Strict):
    """``POST /sandboxes/{id}/snapshots`` (E2B)."""

    name: Name | None = None
    memory: StrictBool | None = None


class ForkRequest(Strict):
    """``POST /sandboxes/{id}/fork`` (E2B)."""

    timeout: StrictInt | None = None
    count: StrictInt | None = None


class CheckpointRequest(Strict):
    """``POST /sandboxes/{id}/checkpoints`` (Bac)."""

    name: Name | None = None
    memory: StrictBool | None = None


class ScheduleRequest(Strict):
    """``PUT /sandboxes/{id}/checkpoints/schedule`` (Bac): null interval stops it."""

    intervalSeconds: StrictInt | None = None
    keep: StrictInt | None = None
