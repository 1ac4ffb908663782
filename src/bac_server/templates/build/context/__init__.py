"""The build context: the files a COPY step uploaded, a tenant's tree the server handles
as root without ever following a name in it to the host.

* ``_unpack``: ``unpack_upload``: the uploaded tar unpacked by an unprivileged, bounded
  child that makes each entry through ``openat2`` confined to the tree.
* ``_glob``: ``glob_context``, ``entry_exists``: the entries a COPY source names, found
  from the tree's fd without following a link (``ThroughLink`` when a path goes
  through one).
"""

from ._glob import ThroughLink, entry_exists, glob_context
from ._unpack import DEFAULT_LIMITS, Limits, unpack_upload

__all__ = [
    "DEFAULT_LIMITS",
    "Limits",
    "ThroughLink",
    "entry_exists",
    "glob_context",
    "unpack_upload",
]
