"""Listing sandboxes: filters, ordering and cursor pagination (pure functions).

The cursor is opaque to clients: base64url of ``<started_at µs>:<sandbox id>`` of the last
item returned. Items are ordered by start time, ties broken by id, so a cursor names one
exact position even when sandboxes start or end between pages.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ..errors import InvalidRequest
from ._registry import LiveSandbox
from ._states import VISIBLE_STATES, SandboxState

MAX_LIMIT = 100


@dataclass(frozen=True)
class Cursor:
    started_us: int
    sandbox_id: str

    def encode(self) -> str:
        raw = f"{self.started_us}:{self.sandbox_id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        try:
            padded = token + "=" * (-len(token) % 4)
            started, _, sandbox_id = (
                base64.urlsafe_b64decode(padded.encode()).decode().partition(":")
            )
            if not sandbox_id.isalnum():
                raise ValueError(sandbox_id)
            return cls(int(started), sandbox_id)
        except (ValueError, binascii.Error, UnicodeError) as exc:
            raise InvalidRequest(
                "invalid nextToken: pass the X-Next-Token value unchanged"
            ) from exc


@dataclass(frozen=True)
class ListQuery:
    metadata: dict[str, str]
    states: frozenset[SandboxState] = VISIBLE_STATES
    newest_first: bool = True
    started_after: datetime | None = None
    template: str | None = None
    limit: int = MAX_LIMIT
    cursor: Cursor | None = None


def _key(sbx: LiveSandbox) -> tuple[int, str]:
    return (_micros(sbx.started_at), sbx.sandbox_id)


def _micros(at: datetime) -> int:
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1_000_000)


def _matches(sbx: LiveSandbox, query: ListQuery) -> bool:
    if sbx.state not in query.states:
        return False
    if query.template is not None and query.template not in (sbx.template_id, sbx.alias):
        return False
    if query.started_after is not None and sbx.started_at < query.started_after:
        return False
    return all(sbx.metadata.get(k) == v for k, v in query.metadata.items())


def page(
    sandboxes: Iterable[LiveSandbox], query: ListQuery
) -> tuple[list[LiveSandbox], str | None]:
    """One page of matching sandboxes and the token of the next page (None on the last)."""
    chosen = sorted(
        (s for s in sandboxes if _matches(s, query)), key=_key, reverse=query.newest_first
    )
    if query.cursor is not None:
        mark = (query.cursor.started_us, query.cursor.sandbox_id)
        if query.newest_first:
            chosen = [s for s in chosen if _key(s) < mark]
        else:
            chosen = [s for s in chosen if _key(s) > mark]
    items = chosen[: query.limit]
    if len(chosen) <= query.limit or not items:
        return items, None
    last = items[-1]
    return items, Cursor(_micros(last.started_at), last.sandbox_id).encode()
