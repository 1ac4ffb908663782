"""The store's part in collecting template storage: what still needs a built template, and
the uploaded build contexts with their sizes.

Part of :class:`bac_server.store.base.Store` (which extends this protocol). Every method
is one transaction.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Protocol

from bac_server.store.template_records import BuildRecord, UploadRecord


class TemplateGcRecords(Protocol):
    async def live_digests(self, live_states: Collection[str]) -> set[str]:
        """Manifest digests something can still start from: those of ready builds a tag
        points at, and those sandboxes are pinned to while the sandbox is in one of
        ``live_states``, has a checkpoint or snapshot, or has no row yet (a create in
        flight pins before it inserts)."""
        ...

    async def builds_in_states(self, states: Collection[str]) -> list[BuildRecord]:
        """Every team's builds in ``states`` (the unfinished ones: their COPY uploads)."""
        ...

    async def all_uploads(self) -> list[UploadRecord]:
        """Every team's uploaded build contexts, oldest first."""
        ...

    async def delete_upload(self, team_id: str, files_hash: str, created_at: datetime) -> bool:
        """Forget the upload if it is still the one created at ``created_at`` (an upload
        of the same hash since then replaced it and stays)."""
        ...

    async def upload_bytes(self, team_id: str) -> int:
        """Bytes of all of the team's uploaded build contexts."""
        ...
