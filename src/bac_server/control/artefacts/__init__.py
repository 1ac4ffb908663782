"""Artefacts (Bac's own, no E2B equivalent): a sandbox's file or directory promoted into
durable storage under (team, run id, name), idempotently (docs/volumes-secrets-artefacts.md).

* ``_service``: ``Artefacts``, promotion, listing, download, delete, quota and retention.
* ``_reading``: the bytes read out of the sandbox through its envd, as its default user.
* ``_blobs``: the bytes on disk, content-addressed, published whole.
"""

from ._blobs import Blobs
from ._service import Artefacts, ArtefactSettings, Promotion

__all__ = ["ArtefactSettings", "Artefacts", "Blobs", "Promotion"]
