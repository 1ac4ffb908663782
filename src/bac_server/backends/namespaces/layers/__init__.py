"""Template layers on the host: overlay stacks mounted, a path looked up in a stack without
mounting it (``_lookup``), a layer copied whole (``_overlay``)."""

from ._lookup import find_in_layers
from ._overlay import copy_tree, mount_overlay

__all__ = ["copy_tree", "find_in_layers", "mount_overlay"]
