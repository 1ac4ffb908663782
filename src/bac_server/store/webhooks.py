"""Webhooks, their deliveries and the event log as the webhooks and the events API read it.

A webhook is a team's URL, the event types it wants and the secret its deliveries are
signed with (sealed at rest, ``store.sealing``). A delivery is one event owed to one
webhook: unique per (webhook, event), so re-scanning the log never owes an event twice,
and durable, so a restart neither loses one nor sends a delivered one again. The cursor is
the highest event id the deliverer has turned into deliveries.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from bac_server.store.sandboxes import EventRecord


@dataclass(frozen=True)
class LoggedEvent:
    """One row of the event log with what its sandbox's row says of it (None when the
    sandbox row is gone)."""

    event_id: int
    event: EventRecord
    template_id: str | None = None
    build_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    started_at: datetime | None = None
    cpu_count: int | None = None
    memory_mb: int | None = None


@dataclass(frozen=True)
class WebhookRecord:
    webhook_id: str
    team_id: str
    name: str
    url: str
    events: tuple[str, ...]
    enabled: bool
    secret: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class DeliveryRecord:
    delivery_id: str
    webhook_id: str
    team_id: str
    event_id: int
    event_type: str
    body: str  # the exact JSON sent (signed as is), fixed when the delivery is owed
    created_at: datetime
    next_attempt_at: datetime
    status: str = "pending"  # pending, success, failed
    attempts: int = 0
    last_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    response_code: int | None = None
    last_error: str | None = None
    duration_ms: int | None = None
    seq: int = 0  # the store's order of deliveries (paging cursor)


@dataclass(frozen=True)
class Attempt:
    """What one attempt changed: the delivery's new status and the attempt's outcome."""

    status: str
    attempts: int
    at: datetime
    next_attempt_at: datetime
    response_code: int | None
    error: str | None
    duration_ms: int


@dataclass(frozen=True)
class DeliveryStats:
    total: int
    success: int
    failed: int
    pending: int
    average_duration_ms: float | None


@dataclass(frozen=True)
class DeliveryQuery:
    limit: int
    after_seq: int | None = None  # the paging cursor: rows past this seq, in the order asked
    ascending: bool = False
    statuses: Collection[str] = ()
    event_types: Collection[str] = ()
    since: datetime | None = None
    until: datetime | None = None


class EventLogStore(Protocol):
    """The event log read by team and type (``EventRecord.wire_type``), for the events API
    and the deliverer."""

    async def team_events(
        self, team_id: str, *, sandbox_id: str | None, types: Collection[str], offset: int,
        limit: int, ascending: bool, since: datetime | None,
    ) -> list[LoggedEvent]:
        """The team's events of ``types`` (of one sandbox, or all), by event id."""
        ...

    async def events_for_delivery(
        self, *, team_ids: Collection[str], types: Collection[str], after_id: int,
        up_to_id: int | None = None, since: datetime | None = None, limit: int,
        newest_first: bool = False,
    ) -> list[LoggedEvent]:
        """Events of ``types`` of these teams with ids in (``after_id``, ``up_to_id``],
        written at or after ``since`` when given, by event id (the highest first with
        ``newest_first``)."""
        ...


class WebhookStore(Protocol):
    """Every method is one transaction. Secrets are sealed at rest."""

    async def insert_webhook(self, webhook: WebhookRecord, *, max_per_team: int) -> bool:
        """Insert unless the team has ``max_per_team`` webhooks already (False then)."""
        ...

    async def get_webhook(self, team_id: str, webhook_id: str) -> WebhookRecord | None: ...

    async def list_webhooks(self, team_id: str) -> list[WebhookRecord]: ...

    async def enabled_webhooks(self) -> list[WebhookRecord]: ...

    async def update_webhook(self, webhook: WebhookRecord) -> bool:
        """Replace the team's webhook of that id; False when there is none."""
        ...

    async def delete_webhook(self, team_id: str, webhook_id: str) -> bool:
        """Delete it and its deliveries; False when there is none."""
        ...

    async def cursor(self) -> int: ...

    async def owe(self, deliveries: Sequence[DeliveryRecord], cursor: int) -> int:
        """Insert the deliveries not yet owed (unique per webhook and event) and move the
        cursor to ``cursor`` (never back), together; returns how many were new."""
        ...

    async def due(self, now: datetime, limit: int,
                  skip: Collection[str] = ()) -> list[DeliveryRecord]:
        """Pending deliveries whose next attempt is due, oldest first, but those of the
        webhooks in ``skip``."""
        ...

    async def record_attempt(self, delivery_id: str, attempt: Attempt) -> None: ...

    async def deliveries(self, team_id: str, webhook_id: str,
                         query: DeliveryQuery) -> list[DeliveryRecord]: ...

    async def delivery(self, team_id: str, webhook_id: str,
                       delivery_id: str) -> DeliveryRecord | None: ...

    async def delivery_stats(self, team_id: str, webhook_id: str, *,
                             since: datetime | None, until: datetime | None) -> DeliveryStats:
        ...

    async def prune_deliveries(self, before: datetime) -> int:
        """Forget finished deliveries created before ``before``; returns how many."""
        ...
