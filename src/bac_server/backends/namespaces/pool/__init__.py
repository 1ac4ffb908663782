"""Sandboxes made ahead: the ready pool, and the create that hands them out.

* ``_pool``: ``ReadyPool``, slots started ahead per hot image (``PoolKey``), handed out on
  create, or the sandbox started cold when none fits.
"""

from ._pool import CLOSE_BOUND_S, PoolKey, ReadyPool

__all__ = ["CLOSE_BOUND_S", "PoolKey", "ReadyPool"]
