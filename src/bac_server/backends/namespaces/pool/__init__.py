"""Sandboxes made ahead: the ready pool, the create that hands them out, and start
snapshots taken.

* ``_pool``: ``ReadyPool``, slots booted or restored from a template's start snapshot
  ahead (``PoolKey``), handed out on create; else the sandbox restored or booted.
* ``_start_snapshot``: a template's start snapshot taken (booted, ready, checkpointed).
"""

from ._pool import CLOSE_BOUND_S, PoolKey, ReadyPool
from ._start_snapshot import take_start_snapshot

__all__ = ["CLOSE_BOUND_S", "PoolKey", "ReadyPool", "take_start_snapshot"]
