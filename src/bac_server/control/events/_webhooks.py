"""A team's webhooks: made, listed, changed and deleted (``/events/webhooks``), and their
deliveries' log and stats. Each team sees and manages only its own; another team's
webhook is not found. The signature secret is the team's choice, sealed at rest, and
never answered back.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from bac_server.store import (
    DeliveryQuery,
    DeliveryRecord,
    DeliveryStats,
    WebhookRecord,
    WebhookStore,
)

from ..errors import InvalidRequest, NotFound
from ..keys import Team
from ._destinations import RefusedDestination, WebhookDestinations
from ._view import event_types

MAX_NAME_CHARS = 255
MAX_SECRET_CHARS = 1024


@dataclass(frozen=True)
class WebhookLimits:
    max_per_team: int = 10


@dataclass(frozen=True)
class WebhookSpec:
    url: str
    events: Sequence[str]
    secret: str
    name: str = ""
    enabled: bool = True


@dataclass(frozen=True)
class WebhookChanges:
    name: str | None = None
    url: str | None = None
    events: Sequence[str] | None = None
    enabled: bool | None = None
    secret: str | None = None


def _name(name: str) -> str:
    if len(name) > MAX_NAME_CHARS:
        raise InvalidRequest(f"name is longer than {MAX_NAME_CHARS} characters")
    return name


def _secret(secret: str) -> str:
    if not secret:
        raise InvalidRequest("signatureSecret must not be empty")
    if len(secret) > MAX_SECRET_CHARS:
        raise InvalidRequest(f"signatureSecret is longer than {MAX_SECRET_CHARS} characters")
    return secret


def _events(events: Sequence[str]) -> tuple[str, ...]:
    if not events:
        raise InvalidRequest("events must name at least one event type")
    return event_types(events, "events")


class Webhooks:
    def __init__(self, *, store: WebhookStore, destinations: WebhookDestinations,
                 limits: WebhookLimits,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._store = store
        self._destinations = destinations
        self._limits = limits
        self._clock = clock

    async def _url(self, url: str) -> str:
        try:
            await self._destinations.target(url)
        except RefusedDestination as exc:
            raise InvalidRequest(str(exc)) from None
        return url

    async def create(self, team: Team, spec: WebhookSpec) -> WebhookRecord:
        now = self._clock()
        record = WebhookRecord(
            webhook_id=secrets.token_hex(16), team_id=team.team_id, name=_name(spec.name),
            url=await self._url(spec.url), events=_events(spec.events), enabled=spec.enabled,
            secret=_secret(spec.secret), created_at=now, updated_at=now)
        if not await self._store.insert_webhook(record,
                                                max_per_team=self._limits.max_per_team):
            raise InvalidRequest(f"the team has {self._limits.max_per_team} webhooks, the "
                                 "most it may have; delete one first")
        return record

    async def of_team(self, team: Team) -> list[WebhookRecord]:
        return await self._store.list_webhooks(team.team_id)

    async def get(self, team: Team, webhook_id: str) -> WebhookRecord:
        found = await self._store.get_webhook(team.team_id, webhook_id)
        if found is None:
            raise NotFound(f"webhook {webhook_id[:80]!r} not found")
        return found

    async def update(self, team: Team, webhook_id: str,
                     changes: WebhookChanges) -> WebhookRecord:
        current = await self.get(team, webhook_id)
        updated = replace(
            current,
            name=current.name if changes.name is None else _name(changes.name),
            url=current.url if changes.url is None else await self._url(changes.url),
            events=current.events if changes.events is None else _events(changes.events),
            enabled=current.enabled if changes.enabled is None else changes.enabled,
            secret=current.secret if changes.secret is None else _secret(changes.secret),
            updated_at=self._clock())
        if not await self._store.update_webhook(updated):
            raise NotFound(f"webhook {webhook_id[:80]!r} not found")
        return updated

    async def delete(self, team: Team, webhook_id: str) -> None:
        if not await self._store.delete_webhook(team.team_id, webhook_id):
            raise NotFound(f"webhook {webhook_id[:80]!r} not found")

    async def deliveries(self, team: Team, webhook_id: str,
                         query: DeliveryQuery) -> list[DeliveryRecord]:
        await self.get(team, webhook_id)
        if query.event_types:
            event_types(query.event_types, "eventType")
        return await self._store.deliveries(team.team_id, webhook_id, query)

    async def delivery(self, team: Team, webhook_id: str, delivery_id: str) -> DeliveryRecord:
        found = await self._store.delivery(team.team_id, webhook_id, delivery_id)
        if found is None:
            raise NotFound(f"delivery {delivery_id[:80]!r} not found")
        return found

    async def stats(self, team: Team, webhook_id: str, *, since: datetime | None,
                    until: datetime | None) -> DeliveryStats:
        await self.get(team, webhook_id)
        return await self._store.delivery_stats(team.team_id, webhook_id, since=since,
                                                until=until)
