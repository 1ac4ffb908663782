"""A sandbox's saved states in the control plane: Bac's checkpoints (its timeline, on
demand or on a schedule, rolled back to, ending with it), and E2B's snapshots (kept beyond
it, a create starts from one) and forks (one checkpoint, many new sandboxes).

* ``_timeline``: ``Checkpoints``, taking any kind under the team's disk quota, the
  timeline, restore, delete, schedules, and the sweep of what a crash left.
* ``_snapshots``: ``Snapshots``, named snapshots and forks.
"""

from ._snapshots import MAX_FORKS, Snapshots
from ._timeline import Checkpoints

__all__ = ["MAX_FORKS", "Checkpoints", "Snapshots"]
