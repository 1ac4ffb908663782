"""Volumes (E2B's ``Volume``; docs/volumes-secrets-artefacts.md, *Volumes*): a team's
named file systems, kept on the host, mounted into its sandboxes, read and written through
the content API with each volume's own token.

* ``_service``: ``Volumes``, create, list, get, destroy, the token's check, a create's
  mounts checked and bound.
* ``_content``: ``VolumeContent``, the content API's file work on the host, confined to
  the volume (``openat2`` ``RESOLVE_IN_ROOT``, nothing followed out).
"""

from ._content import EntryStat, Upload, VolumeContent, failure, normalize
from ._service import Mount, Relayed, Volumes, VolumeSettings, content_at, mount_path

__all__ = ["EntryStat", "Mount", "Relayed", "Upload", "VolumeContent", "VolumeSettings",
           "Volumes", "content_at", "failure", "mount_path", "normalize"]
