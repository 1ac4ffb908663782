"""Volumes on this host (``backends.base.VolumeHost``): each one's file system in an image
of its own (``_storage``), bound into running sandboxes and kept bound through pauses
(``_attach``)."""

from ._attach import bind_volumes, rebind
from ._storage import VolumeStorage

__all__ = ["VolumeStorage", "bind_volumes", "rebind"]
