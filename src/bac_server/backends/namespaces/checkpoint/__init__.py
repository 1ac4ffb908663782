"""Pauses that leave memory or files on disk, checkpoints, roll-backs and copies.

* ``_suspender``: ``Suspender``, the freezer's pause and resume, suspend and wake.
* ``_checkpointer``: ``Checkpointer``, checkpoints taken, restored (a roll-back), copied
  into new sandboxes (``_copies``: snapshots, forks) and deleted; ``_stored``: a
  checkpoint's directory.
* ``_durable``: ``Flusher``, what a pause or checkpoint wrote made durable after the call
  (``_writeback``: in chunks); ``_discard``: a resume's images deleted off its path.
* ``_handover``: ``Handover``, suspended sandboxes' state exported to storage every node
  shares, and taken over by another node.
* ``criu/``: CRIU driven for one slot.
"""

from ._checkpointer import Checkpointer
from ._durable import Flusher
from ._handover import Handover
from ._stored import bundles_in_use
from ._suspender import Suspender, prepare_checkpoints
from .criu import Criu, choose_runtime

__all__ = [
    "Checkpointer",
    "Criu",
    "Flusher",
    "Handover",
    "Suspender",
    "bundles_in_use",
    "choose_runtime",
    "prepare_checkpoints",
]
