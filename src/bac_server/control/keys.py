"""API keys: issue, check, list and revoke, and the team a key names. Keys are stored only
as sha256 hashes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bac_server.control.errors import InvalidRequest, Unauthenticated
from bac_server.control.tokens import (
    KEY_DISPLAY_LENGTH,
    hash_api_key,
    new_api_key,
    new_key_id,
)
from bac_server.store import ApiKeyRecord, KeyStore

# A revocation made by another process (the CLI) takes effect within this many seconds.
_CACHE_SECONDS = 2.0
_MAX_NAME = 255


@dataclass(frozen=True)
class Team:
    """The tenant an API key belongs to: what it may see and how much it may run."""

    team_id: str
    name: str
    # The name of the API key the request came with (what made a sandbox, shown in
    # Mission Control); None when no key is involved. Not part of the team's identity.
    key_name: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    team: str
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


class KeyService:
    def __init__(self, key_store: KeyStore) -> None:
        self._key_store = key_store
        self._cache: dict[str, tuple[float, Team]] = {}

    async def create(self, team_name: str, name: str) -> str:
        """Issue a key for ``team_name`` (created when missing); returns the key once."""
        for label, value in (("team", team_name), ("name", name)):
            if not value or len(value) > _MAX_NAME or not value.isprintable():
                raise InvalidRequest(f"key {label} must be 1-{_MAX_NAME} printable characters")
        team = await self._key_store.ensure_team(team_name)
        key = new_api_key()
        await self._key_store.add_api_key(
            ApiKeyRecord(
                key_id=new_key_id(),
                team_id=team.team_id,
                name=name,
                key_hash=hash_api_key(key),
                prefix=key[:KEY_DISPLAY_LENGTH],
                created_at=datetime.now(UTC),
            )
        )
        return key

    async def authenticate(self, key: str | None) -> Team:
        if not key:
            raise Unauthenticated("missing API key: send it in the X-API-KEY header")
        digest = hash_api_key(key)
        cached = self._cache.get(digest)
        now = time.monotonic()
        if cached is not None and now - cached[0] < _CACHE_SECONDS:
            return cached[1]
        record = await self._key_store.find_api_key(digest)
        if record is None or record.revoked_at is not None:
            self._cache.pop(digest, None)
            raise Unauthenticated("invalid API key")
        team = Team(team_id=record.team_id, name=record.team_id, key_name=record.name)
        self._cache[digest] = (now, team)
        return team

    async def list(self) -> list[KeyInfo]:
        return [
            KeyInfo(k.key_id, team.name, k.name, k.prefix, k.created_at, k.revoked_at)
            for k, team in await self._key_store.list_api_keys()
        ]

    async def team_names(self) -> dict[str, str]:
        """Every team that has a key, its id to its name."""
        return {team.team_id: team.name for _, team in await self._key_store.list_api_keys()}

    async def revoke(self, key_id_or_prefix: str) -> int:
        count = await self._key_store.revoke_api_key(key_id_or_prefix, datetime.now(UTC))
        self._cache.clear()
        return count
