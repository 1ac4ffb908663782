r"""A team's secrets (E2B's ``Secret``): create, update (a new version), read, list,
delete, and the values the egress relay substitutes (``values``).

Values are write-only: nothing here returns one but :meth:`Secrets.values`, which only
the composition root's relay lookup calls. A name is what ``Secret.fill(name)`` puts in
``${e2b.secrets.<name>}``: non-empty, at most 255 characters, no ``{``, ``}``, ``$``,
whitespace or control characters, none of ``/?#%\`` (the SDK puts the name in the URL's
path unquoted), and not shaped like a secret id (ids and names share one path
segment). Metadata follows E2B's bounds: 32 entries, keys of at most 128 bytes, values
of at most 1024, 8192 in all.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from bac_server.control.errors import Conflict, InvalidRequest, NotFound
from bac_server.control.keys import Team
from bac_server.store import SecretRecord, SecretStore, StoreConflict

MAX_VALUE_BYTES = 64 * 1024
MAX_NAME = 255
MAX_LIMIT = 100
_BAD_NAME = re.compile(r"[{}$/?#%\\\s\x00-\x1f\x7f-\x9f]")
_METADATA_ENTRIES = 32
_METADATA_KEY_BYTES = 128
_METADATA_VALUE_BYTES = 1024
_METADATA_BYTES = 8192


class SecretNotFoundError(NotFound):
    def __init__(self, ref: str) -> None:
        super().__init__(f"secret {ref!r} not found")


@dataclass(frozen=True)
class SecretPage:
    items: list[SecretRecord]
    next_token: str | None


def check_name(name: str) -> str:
    if not name or len(name) > MAX_NAME or _BAD_NAME.search(name):
        raise InvalidRequest(
            f"secret name {name[:80]!r} is not usable: 1-{MAX_NAME} characters, none of "
            "'{', '}', '$', '/', '?', '#', '%', '\\', whitespace or control characters")
    if _is_id(name):
        raise InvalidRequest(f"secret name {name!r} has the shape of a secret id")
    return name


def _is_id(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _place(token: str) -> tuple[datetime, str]:
    at, _, secret_id = token.partition("~")
    try:
        when = datetime.fromtimestamp(float(at), UTC)
    except (ValueError, OverflowError, OSError):
        when = None
    if when is None or not _is_id(secret_id):
        raise InvalidRequest("invalid nextToken: pass the X-Next-Token value unchanged")
    return when, secret_id


def _check_value(value: str) -> str:
    size = len(value.encode())
    if not 0 < size <= MAX_VALUE_BYTES:
        raise InvalidRequest(f"a secret value is 1 to {MAX_VALUE_BYTES} bytes, not {size}")
    return value


def _check_metadata(metadata: dict[str, str]) -> dict[str, str]:
    if len(metadata) > _METADATA_ENTRIES:
        raise InvalidRequest(f"metadata has more than {_METADATA_ENTRIES} entries")
    total = 0
    for key, value in metadata.items():
        if not 0 < len(key.encode()) <= _METADATA_KEY_BYTES:
            raise InvalidRequest(f"metadata key {key[:40]!r} is not 1-{_METADATA_KEY_BYTES} "
                                 "bytes")
        if len(value.encode()) > _METADATA_VALUE_BYTES:
            raise InvalidRequest(f"metadata value of {key[:40]!r} is over "
                                 f"{_METADATA_VALUE_BYTES} bytes")
        total += len(key.encode()) + len(value.encode())
    if total > _METADATA_BYTES:
        raise InvalidRequest(f"metadata is over {_METADATA_BYTES} bytes in all")
    return dict(metadata)


class Secrets:
    def __init__(self, store: SecretStore) -> None:
        self._store = store

    async def create(self, team: Team, name: str, value: str,
                     metadata: dict[str, str] | None) -> SecretRecord:
        now = datetime.now(UTC)
        record = SecretRecord(secret_id=str(uuid.uuid4()), team_id=team.team_id,
                              name=check_name(name), version=1, created_at=now,
                              updated_at=now, metadata=_check_metadata(metadata or {}))
        try:
            await self._store.add_secret(record, _check_value(value))
        except StoreConflict:
            raise Conflict(f"a secret named {name!r} exists") from None
        return record

    async def update(self, team: Team, ref: str, value: str,
                     metadata: dict[str, str] | None) -> SecretRecord:
        checked = None if metadata is None else _check_metadata(metadata)
        found = await self._store.update_secret(team.team_id, ref, _check_value(value),
                                                checked, datetime.now(UTC))
        if found is None:
            raise SecretNotFoundError(ref)
        return found

    async def get(self, team: Team, ref: str) -> SecretRecord:
        found = await self._store.get_secret(team.team_id, ref)
        if found is None:
            raise SecretNotFoundError(ref)
        return found

    async def list(self, team: Team, next_token: str | None, limit: int) -> SecretPage:
        """Oldest first; the token is the last item's place (its creation time and id),
        so a page goes on from there even once that secret is destroyed."""
        after = None if next_token is None else _place(next_token)
        items = await self._store.list_secrets(team.team_id, after, limit + 1)
        more = len(items) > limit
        items = items[:limit]
        last = items[-1] if more and items else None
        return SecretPage(items, None if last is None else
                          f"{last.created_at.timestamp()!r}~{last.secret_id}")

    async def delete(self, team: Team, ref: str) -> None:
        if not await self._store.delete_secret(team.team_id, ref):
            raise SecretNotFoundError(ref)

    async def values(self, team_id: str, names: frozenset[str]) -> dict[str, str]:
        """The current values of the team's secrets named (unknown names left out), for
        the egress relay only."""
        return await self._store.secret_values(team_id, names)
