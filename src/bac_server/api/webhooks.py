"""E2B's lifecycle webhooks: ``POST/GET /events/webhooks``, ``GET/PATCH/DELETE
/events/webhooks/{webhookID}``, and the delivery log: ``…/deliveries`` (newest first,
``X-Next-Cursor`` for the next page), ``…/deliveries/{deliveryID}``, ``…/stats``. The
signature secret is written, never read back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictStr
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.body import Strict, read_model
from bac_server.api.context import settings, team
from bac_server.api.errors import BadRequest
from bac_server.api.events import bool_param, services
from bac_server.api.query import int_param
from bac_server.api.views import rfc3339
from bac_server.control.events import WebhookChanges, WebhookSpec
from bac_server.store import DeliveryQuery, DeliveryRecord, WebhookRecord

_STATUSES = ("success", "failed", "pending")
EventList = Annotated[list[StrictStr], Field(max_length=64)]


class WebhookBody(Strict):
    name: StrictStr | None = None
    url: StrictStr
    enabled: StrictBool | None = None
    events: EventList
    signatureSecret: StrictStr


class WebhookPatch(Strict):
    name: StrictStr | None = None
    url: StrictStr | None = None
    enabled: StrictBool | None = None
    events: EventList | None = None
    signatureSecret: StrictStr | None = None


def _webhook(w: WebhookRecord) -> dict[str, Any]:
    return {"id": w.webhook_id, "teamID": w.team_id, "name": w.name, "url": w.url,
            "enabled": w.enabled, "events": list(w.events), "createdAt": rfc3339(w.created_at),
            "updatedAt": rfc3339(w.updated_at)}


def _opt(at: datetime | None) -> str | None:
    return None if at is None else rfc3339(at)


def _delivery(d: DeliveryRecord) -> dict[str, Any]:
    return {"id": d.delivery_id, "webhookId": d.webhook_id, "eventId":
            json.loads(d.body).get("id"), "eventType": d.event_type, "status": d.status,
            "attempts": d.attempts, "responseCode": d.response_code, "lastError": d.last_error,
            "durationMs": d.duration_ms, "createdAt": rfc3339(d.created_at),
            "lastAttemptAt": _opt(d.last_attempt_at),
            "nextAttemptAt": rfc3339(d.next_attempt_at) if d.status == "pending" else None,
            "deliveredAt": _opt(d.delivered_at)}


def _webhook_id(request: Request) -> str:
    value: str = request.path_params["webhookID"]
    return value


def _time(params: QueryParams, name: str) -> datetime | None:
    raw = params.get(name)
    if not raw:
        return None
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"{name} must be an RFC 3339 time, got {raw[:40]!r}") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


async def create_webhook(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, WebhookBody, settings(request).max_body_bytes)
    created = await services(request).webhooks.create(caller, WebhookSpec(
        url=body.url, events=body.events, secret=body.signatureSecret, name=body.name or "",
        enabled=True if body.enabled is None else body.enabled))
    return JSONResponse(_webhook(created), 201)


async def list_webhooks(request: Request) -> Response:
    caller = await team(request)
    return JSONResponse([_webhook(w) for w in await services(request).webhooks.of_team(caller)])


async def get_webhook(request: Request) -> Response:
    caller = await team(request)
    return JSONResponse(_webhook(await services(request).webhooks.get(caller,
                                                                      _webhook_id(request))))


async def update_webhook(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, WebhookPatch, settings(request).max_body_bytes)
    updated = await services(request).webhooks.update(caller, _webhook_id(request),
                                                      WebhookChanges(
        name=body.name, url=body.url, events=body.events, enabled=body.enabled,
        secret=body.signatureSecret))
    return JSONResponse(_webhook(updated))


async def delete_webhook(request: Request) -> Response:
    caller = await team(request)
    await services(request).webhooks.delete(caller, _webhook_id(request))
    return Response(status_code=204)


async def list_deliveries(request: Request) -> Response:
    caller = await team(request)
    params = request.query_params
    limit = int_param(params, "limit", default=20, low=1, high=100) or 20
    cursor = params.get("cursor") or None
    if cursor is not None and not (cursor.isdigit() and len(cursor) < 19):
        raise BadRequest("invalid cursor: pass the X-Next-Cursor value unchanged")
    statuses = [s for s in params.getlist("deliveryStatus") if s]
    for status in statuses:
        if status not in _STATUSES:
            raise BadRequest(f"deliveryStatus {status[:40]!r} is not one of: "
                             + ", ".join(_STATUSES))
    query = DeliveryQuery(
        limit=limit, after_seq=None if cursor is None else int(cursor),
        ascending=bool_param(params, "orderAsc", False), statuses=statuses,
        event_types=[t for t in params.getlist("eventType") if t],
        since=_time(params, "start"), until=_time(params, "end"))
    found = await services(request).webhooks.deliveries(caller, _webhook_id(request), query)
    headers = {"X-Next-Cursor": str(found[-1].seq)} if len(found) == limit else {}
    return JSONResponse([_delivery(d) for d in found], headers=headers)


async def get_delivery(request: Request) -> Response:
    caller = await team(request)
    found = await services(request).webhooks.delivery(
        caller, _webhook_id(request), str(request.path_params["deliveryID"]))
    return JSONResponse({**_delivery(found), "payload": json.loads(found.body)})


async def delivery_stats(request: Request) -> Response:
    caller = await team(request)
    params = request.query_params
    stats = await services(request).webhooks.stats(
        caller, _webhook_id(request), since=_time(params, "start"), until=_time(params, "end"))
    return JSONResponse({"total": stats.total, "success": stats.success,
                         "failed": stats.failed, "pending": stats.pending,
                         "averageDurationMs": stats.average_duration_ms})
