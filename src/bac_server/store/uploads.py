"""Uploaded build contexts: what :class:`UploadStore` keeps of each team's uploads (a tar,
gzipped or not, keyed by the SDK's hash) for the upload cache, its quota and its expiry
(``control.templates``, ``control.gc``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class UploadRecord:
    """A build context a team uploaded (a tar, gzipped or not), keyed by the SDK's hash."""

    team_id: str
    files_hash: str
    path: str
    size_bytes: int
    created_at: datetime


class UploadStore(Protocol):
    """Every method is one transaction."""

    async def add_upload(self, upload: UploadRecord) -> None:
        """Insert or replace (the same hash uploaded again replaces the file)."""
        ...

    async def get_upload(self, team_id: str, files_hash: str) -> UploadRecord | None: ...

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
