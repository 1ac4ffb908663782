"""Parsing the list query string into a :class:`bac_server.control.ListQuery`.

``metadata`` is a query string inside a query parameter: the SDK quotes each key and value,
``urlencode``s the pairs, and the HTTP client encodes the result again. After the one decode
the framework does, we unquote the whole, split on ``&`` and ``=``, and unquote each part,
exactly as E2B's API does, so ``{"k": "v w"}`` round-trips.

Apart from :mod:`bac_server.api.sandboxes`, its one user: the grammar of the listing's query
string is a concept of its own, tested alone against what the official SDK encodes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import unquote_plus

from starlette.datastructures import QueryParams

from bac_server.api.errors import BadRequest
from bac_server.control import MAX_LIMIT, Cursor, ListQuery, SandboxState

_STATES = {"running": SandboxState.RUNNING, "paused": SandboxState.PAUSED}
_MAX_FILTERS = 64


def parse_metadata(raw: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for part in unquote_plus(raw).split("&"):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise BadRequest(f"metadata filter {part!r} is not key=value")
        pairs[unquote_plus(key)] = unquote_plus(value)
        if len(pairs) > _MAX_FILTERS:
            raise BadRequest(f"metadata filter has more than {_MAX_FILTERS} pairs")
    return pairs


def _states(raw: str) -> frozenset[SandboxState]:
    chosen = set()
    for name in raw.split(","):
        name = name.strip()
        if name not in _STATES:
            raise BadRequest(f"state {name!r} is not one of: running, paused")
        chosen.add(_STATES[name])
    return frozenset(chosen)


def _limit(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError as exc:
        raise BadRequest(f"limit must be an integer between 1 and {MAX_LIMIT}") from exc
    if not 1 <= value <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}, got {value}")
    return value


def _started_after(raw: str) -> datetime:
    # A '+' in an unencoded offset arrives as a space.
    text = raw.strip().replace(" ", "+")
    try:
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise BadRequest(f"startedAfter {raw!r} is not an RFC 3339 date-time") from exc
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def parse_list_query(params: QueryParams, *, paginated: bool) -> ListQuery:
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise BadRequest(f"order {order!r} is not one of: asc, desc")
    token = params.get("nextToken") if paginated else None
    return ListQuery(
        metadata=parse_metadata(params["metadata"]) if params.get("metadata") else {},
        states=_states(params["state"]) if params.get("state") else frozenset(_STATES.values()),
        newest_first=order == "desc",
        started_after=_started_after(params["startedAfter"])
        if params.get("startedAfter")
        else None,
        template=params.get("template") or None,
        limit=_limit(params["limit"]) if paginated and params.get("limit") else MAX_LIMIT,
        cursor=Cursor.decode(token) if token else None,
    )
