"""``AsyncEvents``: a team's lifecycle events and webhooks (E2B's events API).

::

    async with AsyncEvents() as events:                 # BAC_API_KEY / BAC_API_URL
        for event in await events.sandbox(sandbox_id, ascending=True):
            print(event.timestamp, event.type)
        hook = await events.create_webhook("https://example.com/hook",
                                           ["sandbox.lifecycle.killed"], secret="...")

A webhook's deliveries carry ``e2b-signature``; :func:`verify_signature` checks one.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Unpack
from urllib.parse import quote

import httpx

from bac import _errors as e
from bac._api import ApiClient
from bac._config import ConnectionConfig, ConnectionOpts

LIFECYCLE_TYPES = tuple(f"sandbox.lifecycle.{t}" for t in (
    "created", "updated", "killed", "paused", "resumed", "checkpointed"))
WARNING_TYPE = "bac.sandbox.warning"
# A sandbox's envd stopped answering for the server's bound, or answers again.
HEALTH_TYPES = ("bac.sandbox.unhealthy", "bac.sandbox.healthy")


def verify_signature(secret: str, body: bytes, signature: str) -> bool:
    """Whether ``signature`` (header ``e2b-signature``) signs ``body`` (the raw bytes
    received) with ``secret``."""
    digest = hashlib.sha256(secret.encode() + body).digest()
    return hmac.compare_digest(base64.b64encode(digest).decode().rstrip("="), signature)


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise e.ServerError(f"the server sent a bad time {value!r}") from exc


def _required_time(value: Any) -> datetime:
    found = _time(value)
    if found is None:
        raise e.ServerError("the server sent an event without a time")
    return found


@dataclass(frozen=True)
class LifecycleEvent:
    id: str
    type: str
    sandbox_id: str
    timestamp: datetime
    template_id: str
    build_id: str
    execution_id: str
    metadata: dict[str, str]
    data: dict[str, Any]  # eventData as sent (execution, Bac's message and fields)
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_api(cls, item: Any) -> LifecycleEvent:
        if not isinstance(item, dict):
            raise e.ServerError("the server sent an event that is not an object")
        data = dict(item.get("eventData") or {})
        return cls(id=str(item.get("id", "")), type=str(item.get("type", "")),
                   sandbox_id=str(item.get("sandboxId", "")),
                   timestamp=_required_time(item.get("timestamp")),
                   template_id=str(item.get("sandboxTemplateId", "")),
                   build_id=str(item.get("sandboxBuildId", "")),
                   execution_id=str(item.get("sandboxExecutionId", "")),
                   metadata={str(k): str(v) for k, v in
                             dict(data.get("sandbox_metadata") or {}).items()},
                   data=data, raw=item)


@dataclass(frozen=True)
class Webhook:
    id: str
    name: str
    url: str
    enabled: bool
    events: tuple[str, ...]
    created_at: datetime | None

    @classmethod
    def from_api(cls, item: Any) -> Webhook:
        if not isinstance(item, dict):
            raise e.ServerError("the server sent a webhook that is not an object")
        return cls(id=str(item.get("id", "")), name=str(item.get("name", "")),
                   url=str(item.get("url", "")), enabled=bool(item.get("enabled")),
                   events=tuple(str(t) for t in item.get("events") or ()),
                   created_at=_time(item.get("createdAt")))


@dataclass(frozen=True)
class WebhookDelivery:
    id: str
    event_id: str
    event_type: str
    status: str  # pending, success, failed
    attempts: int
    response_code: int | None
    last_error: str | None
    created_at: datetime | None
    delivered_at: datetime | None

    @classmethod
    def from_api(cls, item: Any) -> WebhookDelivery:
        if not isinstance(item, dict):
            raise e.ServerError("the server sent a delivery that is not an object")
        code = item.get("responseCode")
        return cls(id=str(item.get("id", "")), event_id=str(item.get("eventId", "")),
                   event_type=str(item.get("eventType", "")),
                   status=str(item.get("status", "")), attempts=int(item.get("attempts") or 0),
                   response_code=None if code is None else int(code),
                   last_error=item.get("lastError"), created_at=_time(item.get("createdAt")),
                   delivered_at=_time(item.get("deliveredAt")))


def _list(data: Any, what: str) -> builtins.list[Any]:
    if not isinstance(data, list):
        raise e.ServerError(f"the server's {what} is not a list")
    return data


class AsyncEvents:
    """The events API and webhooks of one Bac server, for one team (its API key)."""

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        self._api = ApiClient(ConnectionConfig.resolve(**opts))

    async def aclose(self) -> None:
        await self._api.aclose()

    async def __aenter__(self) -> AsyncEvents:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _events(self, path: str, types: Sequence[str], limit: int, offset: int,
                      ascending: bool) -> builtins.list[LifecycleEvent]:
        if not 1 <= limit <= 100:
            raise e.InvalidArgumentError(f"limit must be between 1 and 100, got {limit}")
        if offset < 0:
            raise e.InvalidArgumentError(f"offset must be at least 0, got {offset}")
        params = httpx.QueryParams({"limit": limit, "offset": offset,
                                    "orderAsc": "true" if ascending else "false",
                                    "types": list(types)})
        response = await self._api.request("GET", path, params=params)
        return [LifecycleEvent.from_api(i) for i in _list(response.json(), "event list")]

    async def sandbox(self, sandbox_id: str, *, types: Sequence[str] = (), limit: int = 10,
                      offset: int = 0, ascending: bool = False) -> builtins.list[LifecycleEvent]:
        """One sandbox's events (``SandboxNotFoundError`` if it is not the team's)."""
        return await self._events(f"/events/sandboxes/{quote(sandbox_id, safe='')}", types,
                                  limit, offset, ascending)

    async def team(self, *, types: Sequence[str] = (), limit: int = 10, offset: int = 0,
                   ascending: bool = False) -> builtins.list[LifecycleEvent]:
        """The team's events, every sandbox's."""
        return await self._events("/events/sandboxes", types, limit, offset, ascending)

    async def create_webhook(self, url: str, events: Sequence[str], *, secret: str,
                             name: str = "", enabled: bool = True) -> Webhook:
        """Register ``url`` for ``events``; deliveries are signed with ``secret``."""
        data = await self._api.json("POST", "/events/webhooks", ok=(201,), json={
            "name": name, "url": url, "enabled": enabled, "events": list(events),
            "signatureSecret": secret})
        return Webhook.from_api(data)

    async def webhooks(self) -> builtins.list[Webhook]:
        data = await self._api.json("GET", "/events/webhooks")
        return [Webhook.from_api(i) for i in _list(data, "webhook list")]

    async def webhook(self, webhook_id: str) -> Webhook:
        data = await self._api.json("GET", f"/events/webhooks/{quote(webhook_id, safe='')}")
        return Webhook.from_api(data)

    async def update_webhook(self, webhook_id: str, *, name: str | None = None,
                             url: str | None = None, events: Sequence[str] | None = None,
                             enabled: bool | None = None,
                             secret: str | None = None) -> Webhook:
        changes = {"name": name, "url": url, "enabled": enabled, "signatureSecret": secret,
                   "events": None if events is None else list(events)}
        data = await self._api.json(
            "PATCH", f"/events/webhooks/{quote(webhook_id, safe='')}",
            json={k: v for k, v in changes.items() if v is not None})
        return Webhook.from_api(data)

    async def delete_webhook(self, webhook_id: str) -> bool:
        """Unregister a webhook; False when the team has none of that id."""
        try:
            await self._api.request("DELETE", f"/events/webhooks/{quote(webhook_id, safe='')}",
                                    ok=(200, 204))
        except e.NotFoundError:
            return False
        return True

    async def deliveries(self, webhook_id: str, *,
                         limit: int = 20) -> builtins.list[WebhookDelivery]:
        """The webhook's latest deliveries, newest first."""
        data = await self._api.json(
            "GET", f"/events/webhooks/{quote(webhook_id, safe='')}/deliveries",
            params={"limit": str(limit)})
        return [WebhookDelivery.from_api(i) for i in _list(data, "delivery list")]
