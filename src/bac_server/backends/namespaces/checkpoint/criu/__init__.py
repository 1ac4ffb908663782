"""CRIU driven for one slot: its processes saved to images and brought back.

* ``_dump``: the two calls the verbs make, ``dump`` and ``restore`` (and the freezer
  they work from), and the holds a suspend takes on the slot's TCP connections.
* ``_tool``: finding a CRIU fit for this kernel and its host set-up; ``choose_runtime``.
* A direct dump or restore: its command lines (``_args``), the run inside the slot's
  network namespace and cgroups (``_run``, ``_cgroups``), the restore's steps and checks
  (``_restore``, ``_confinement``), memory restored lazily (``_lazy_pages``), the cgroups
  and /dev a suspend makes for its wake (``_wake_ahead``), and the list of image files a
  restore checks first (``_manifest``). Through runc instead: ``_runc``.
"""

from . import _wake_ahead as wake_ahead
from ._dump import (
    Images,
    check_images,
    dump,
    freeze,
    freeze_all,
    release_suspend_lock,
    remove_images,
    restore,
    thaw,
)
from ._manifest import images_bytes
from ._restore import make_ahead
from ._tool import Criu, choose_runtime, ensure_kdat_dir, find_criu

__all__ = [
    "Criu",
    "Images",
    "check_images",
    "choose_runtime",
    "dump",
    "ensure_kdat_dir",
    "find_criu",
    "freeze",
    "freeze_all",
    "images_bytes",
    "make_ahead",
    "release_suspend_lock",
    "remove_images",
    "restore",
    "thaw",
    "wake_ahead",
]
