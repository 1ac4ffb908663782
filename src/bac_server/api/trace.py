"""A sandbox's trace and a run's: Bac's richer view of the event log.

* ``GET /sandboxes/{id}/trace``  every kind of event of the sandbox (lifecycle, each process
  envd ran, each file transfer), oldest first, live or ended. ``kind=a,b`` filters by
  kind, ``since``/``until`` by time (unix milliseconds, ``until`` exclusive), ``after``
  pages by event id (the ``nextCursor`` of the page before), ``limit`` ≤ 1000 (100).
  ``follow=true`` answers NDJSON instead, one event a line, streamed as they are written
  until the sandbox has ended.
* ``GET /trace?metadata=run_id:X``  the same for a *run*: every sandbox of the team whose
  metadata holds each ``key:value`` given (``metadata`` repeated or comma-separated).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from bac_server.api.context import plane, sandbox_id, team
from bac_server.api.errors import BadRequest
from bac_server.api.query import choice_param, epoch_param, int_param
from bac_server.api.views import rfc3339
from bac_server.control import TraceFilter
from bac_server.store import EventRecord

_MAX_ID = (1 << 62) - 1


def event_view(ev: EventRecord) -> dict[str, Any]:
    return {
        "id": ev.event_id,
        "sandboxID": ev.sandbox_id,
        "timestamp": rfc3339(ev.at),
        "kind": ev.kind,
        "level": ev.level,
        "message": ev.message,
        "fields": dict(ev.fields),
        "metadata": dict(ev.metadata),
    }


def _filter(request: Request) -> TraceFilter:
    params = request.query_params
    return TraceFilter.of(
        kinds=params.get("kind"),
        since=epoch_param(params, "since", millis=True),
        until=epoch_param(params, "until", millis=True),
        after_id=int_param(params, "after", default=0, low=0, high=_MAX_ID) or 0,
        limit=int_param(params, "limit", default=100, low=1, high=1000) or 100,
    )


def _page(events: list[EventRecord], flt: TraceFilter) -> JSONResponse:
    more = len(events) == flt.limit and events[-1].event_id is not None
    return JSONResponse({
        "events": [event_view(e) for e in events],
        "nextCursor": str(events[-1].event_id) if more else None,
    })


def metadata_pairs(request: Request) -> dict[str, str]:
    """The ``metadata=key:value`` pairs of the query (repeated or comma-separated)."""
    pairs: dict[str, str] = {}
    for raw in request.query_params.getlist("metadata"):
        for item in raw.split(","):
            if not item:
                continue
            key, sep, value = item.partition(":")
            if not sep or not key:
                raise BadRequest(f"metadata {item[:60]!r} is not key:value")
            pairs[key] = value
    return pairs


async def sandbox_trace(request: Request) -> Response:
    caller = await team(request)
    flt = _filter(request)
    traces = plane(request).traces
    follow = choice_param(request.query_params, "follow", ("true", "false", "1", "0"))
    if follow in ("true", "1"):
        # Checked before the stream starts: an unknown sandbox is a 404, not an empty stream.
        await plane(request).history.sandbox(caller, sandbox_id(request))
        stream = traces.follow(caller, sandbox_id(request), flt)

        async def lines() -> AsyncIterator[bytes]:
            try:
                async for record in stream:
                    yield json.dumps(event_view(record)).encode() + b"\n"
            finally:
                await stream.aclose()

        return StreamingResponse(lines(), media_type="application/x-ndjson",
                                 headers={"Cache-Control": "no-store"})
    return _page(await traces.sandbox(caller, sandbox_id(request), flt), flt)


async def run_trace(request: Request) -> Response:
    caller = await team(request)
    flt = _filter(request)
    return _page(await plane(request).traces.run_trace(caller, metadata_pairs(request), flt), flt)
