"""Cost caps (Bac's own routes; docs/observability.md, "Cost caps").

* ``GET /caps``, ``POST /caps``  the team's caps; a new one on a ``sandbox``
  (``sandboxID``), a ``group`` (one ``metadata`` pair) or the whole ``team`` (per ``day``
  or ``month``), with a ``limit`` in the price table's currency and an ``action``
  (``pause``, the default, or ``kill``).
* ``GET``, ``PATCH``, ``DELETE /caps/{capID}``  one cap; raising its ``limit`` above what is
  spent, or deleting it, lets the sandboxes it paused resume.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.body import Strict, read_model
from bac_server.api.context import plane, settings, team
from bac_server.api.views import rfc3339
from bac_server.control import NotSupported
from bac_server.control.metering import CostCaps, LiveCap

Limit = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=False)]


class CostCapBody(Strict):
    """A sandbox's own cap, given at create (``costCap``)."""

    limit: Limit
    action: Literal["pause", "kill"] | None = None


class CapBody(Strict):
    scope: Literal["sandbox", "group", "team"]
    sandboxID: StrictStr | None = None
    metadata: dict[StrictStr, StrictStr] | None = None
    period: Literal["total", "day", "month"] | None = None
    limit: Limit
    action: Literal["pause", "kill"] | None = None


class CapPatch(Strict):
    limit: Limit | None = None
    action: Literal["pause", "kill"] | None = None


def caps_of(request: Request) -> CostCaps:
    caps = plane(request).caps
    if caps is None:
        raise NotSupported("this server does not meter usage, so it has no cost caps")
    return caps


def cap_view(live: LiveCap) -> dict[str, Any]:
    cap = live.record
    state = "reached" if live.reached else \
        "warned" if cap.warned == live.period else "ok"
    return {
        "capID": cap.cap_id, "scope": cap.scope, "sandboxID": cap.sandbox_id,
        "metadata": {cap.metadata_key: cap.metadata_value} if cap.metadata_key else None,
        "period": cap.period, "limit": cap.amount, "action": cap.action,
        "spent": round(live.spent, 6), "periodStart": live.period_start(), "state": state,
        "createdAt": rfc3339(cap.created_at), "updatedAt": rfc3339(cap.updated_at),
    }


def _cap_id(request: Request) -> str:
    return str(request.path_params["capID"])


async def list_caps(request: Request) -> Response:
    caller = await team(request)
    return JSONResponse([cap_view(c) for c in caps_of(request).of_team(caller)])


async def create_cap(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, CapBody, settings(request).max_body_bytes)
    live = await caps_of(request).create(
        caller, scope=body.scope, limit=body.limit, period=body.period or "total",
        action=body.action or "pause", sandbox_id=body.sandboxID, metadata=body.metadata)
    return JSONResponse(cap_view(live), 201)


async def get_cap(request: Request) -> Response:
    caller = await team(request)
    return JSONResponse(cap_view(caps_of(request).get(caller, _cap_id(request))))


async def update_cap(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, CapPatch, settings(request).max_body_bytes)
    live = await caps_of(request).update(caller, _cap_id(request), limit=body.limit,
                                         action=body.action)
    return JSONResponse(cap_view(live))


async def delete_cap(request: Request) -> Response:
    caller = await team(request)
    await caps_of(request).delete(caller, _cap_id(request))
    return Response(status_code=204)
