"""Collecting template storage: what nothing can start from any more is deleted, after a
grace period, never while a build runs, and only by the template root's sole user.

* ``_collector``: ``StorageCollector``, one collection: what stays (``LiveRefs``), what
  is due, what waits, and its ``StorageReport``.
* ``_scan``: the entries a collection may delete (layers, images, built-in builds,
  manifests), and which entry a path lies in.
* ``_marks``: when each unreferenced entry was first seen so: its quarantine.
* ``_guard``: the lock builds hold shared and a collection takes exclusively
  (``build_guard``).
* ``_trash``: deleting in two steps, a rename into ``.trash`` under the entry's build
  lock, then the removal.
* ``_users``: the data directories that use a template root.
"""

from ._collector import CollectionRefused, Freed, LiveRefs, StorageCollector, StorageReport
from ._guard import build_guard

__all__ = [
    "CollectionRefused",
    "Freed",
    "LiveRefs",
    "StorageCollector",
    "StorageReport",
    "build_guard",
]
