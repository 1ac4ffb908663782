"""Teams and their API keys: what :class:`KeyStore` keeps for issuing and checking keys
(``control.keys``). Keys are kept only as sha256 hashes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class TeamRecord:
    team_id: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class ApiKeyRecord:
    key_id: str
    team_id: str
    name: str
    key_hash: str  # sha256 hex of the whole key; the key itself is never stored
    prefix: str  # first characters of the key, to recognise it in listings
    created_at: datetime
    revoked_at: datetime | None = None


class KeyStore(Protocol):
    """Every method is one transaction."""

    async def ensure_team(self, name: str) -> TeamRecord:
        """The team with this name, created when missing."""
        ...

    async def add_api_key(self, key: ApiKeyRecord) -> None:
        """``StoreConflict`` if the id or the hash exists."""
        ...

    async def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not."""
        ...

    async def list_api_keys(self) -> list[tuple[ApiKeyRecord, TeamRecord]]:
        """Every key with its team, oldest first."""
        ...

    async def revoke_api_key(self, key_id_or_prefix: str, at: datetime) -> int:
        """Revoke keys whose id or prefix matches; returns how many changed."""
        ...
