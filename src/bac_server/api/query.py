"""Small typed readers for query parameters; each failure is a 400 naming the parameter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from starlette.datastructures import QueryParams

from bac_server.api.errors import BadRequest

T = TypeVar("T")

# Far enough for any real timestamp, small enough that datetime never overflows.
_MAX_EPOCH = 253_402_300_799  # 9999-12-31T23:59:59Z


def int_param(
    params: QueryParams, name: str, *, default: int | None, low: int, high: int
) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise BadRequest(f"{name} must be an integer, got {raw[:40]!r}") from exc
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}, got {value}")
    return value


def epoch_param(params: QueryParams, name: str, *, millis: bool = False) -> datetime | None:
    scale = 1000 if millis else 1
    value = int_param(params, name, default=None, low=0, high=_MAX_EPOCH * scale)
    return None if value is None else datetime.fromtimestamp(value / scale, UTC)


def choice_param(params: QueryParams, name: str, choices: tuple[str, ...]) -> str | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if raw not in choices:
        raise BadRequest(f"{name} {raw[:40]!r} is not one of: {', '.join(choices)}")
    return raw


def page_after(items: Sequence[T], key: Callable[[T], str], params: QueryParams, limit: int
               ) -> tuple[Sequence[T], dict[str, str]]:
    """The page of ``items`` after the one whose key is ``nextToken`` (from the start when
    absent), and the ``X-Next-Token`` header when more follow."""
    start = 0
    token = params.get("nextToken")
    if token:
        ids = [key(item) for item in items]
        if token not in ids:
            raise BadRequest("invalid nextToken: pass the X-Next-Token value unchanged")
        start = ids.index(token) + 1
    page = items[start:start + limit]
    headers = {}
    if start + limit < len(items) and page:
        headers["X-Next-Token"] = key(page[-1])
    return page, headers
