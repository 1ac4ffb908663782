"""A team's secrets (E2B's ``Secret``): name, metadata and one sealed value per secret.

The value is write-only: the protocol takes it on create and update and gives it back
only through :meth:`SecretStore.secret_values`, which the egress relay's lookup calls
(never an API read). Only the current version's value is kept: an update seals the new
value under the next version number and the old one is gone with the row's old text
(E2B's readers never name a version).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class SecretRecord:
    secret_id: str
    team_id: str
    name: str
    version: int  # the current version: 1 when created, +1 per update
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, str] = field(default_factory=dict)


class SecretStore(Protocol):
    """Every method is one transaction; ``ref`` is a secret's id or its name."""

    async def add_secret(self, secret: SecretRecord, value: str) -> None:
        """Insert it with its first value; ``StoreConflict`` when the team has one of that
        name."""
        ...

    async def get_secret(self, team_id: str, ref: str) -> SecretRecord | None: ...

    async def list_secrets(self, team_id: str, after: tuple[datetime, str] | None,
                           limit: int) -> list[SecretRecord]:
        """Oldest first (then by id), those after ``after`` (a creation time and id: the
        place of the last one seen, which need not exist any more)."""
        ...

    async def update_secret(self, team_id: str, ref: str, value: str,
                            metadata: dict[str, str] | None, at: datetime
                            ) -> SecretRecord | None:
        """Seal ``value`` as the next version (metadata replaced when given); None when
        there is no such secret."""
        ...

    async def delete_secret(self, team_id: str, ref: str) -> bool: ...

    async def secret_values(self, team_id: str, names: frozenset[str]) -> dict[str, str]:
        """The current values of the team's secrets of those names (absent names are
        left out), opened."""
        ...
