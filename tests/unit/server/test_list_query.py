"""Parsing the list query string exactly as the official SDK encodes it."""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime

import httpx
import pytest
from starlette.datastructures import QueryParams

from bac_server.api.errors import BadRequest
from bac_server.api.list_query import parse_list_query, parse_metadata
from bac_server.control import SandboxState


def _as_sent_by_sdk(metadata: dict[str, str]) -> QueryParams:
    """Encode like e2b 2.63.0's paginator, then as httpx puts it on the wire, then decode once
    as the server framework does."""
    inner = urllib.parse.urlencode(
        {urllib.parse.quote(k): urllib.parse.quote(v) for k, v in metadata.items()}
    )
    url = httpx.URL("http://x/v2/sandboxes", params={"metadata": inner})
    return QueryParams(url.query.decode())


@pytest.mark.parametrize(
    "metadata",
    [{"k": "v w"}, {"a": "1", "b": "x&y=z"}, {"ключ": "значение"}, {"p": "100%"}, {"e": ""}],
)
def test_metadata_filter_round_trips_sdk_encoding(metadata: dict[str, str]) -> None:
    """Whatever the SDK filters by arrives as the same dict."""
    params = _as_sent_by_sdk(metadata)
    assert parse_list_query(params, paginated=True).metadata == metadata


def test_documented_example() -> None:
    """The captured wire example decodes to {"k": "v w"}."""
    params = QueryParams("metadata=k%3Dv%252520w&state=running%2Cpaused&limit=5")
    query = parse_list_query(params, paginated=True)
    assert query.metadata == {"k": "v w"}
    assert query.states == frozenset({SandboxState.RUNNING, SandboxState.PAUSED})
    assert query.limit == 5


def test_started_after_with_offset_and_order() -> None:
    """startedAfter keeps its offset (even when '+' arrives as a space); order=asc flips."""
    params = QueryParams("startedAfter=2026-01-01T01:00:00 01:00&order=asc")
    query = parse_list_query(params, paginated=True)
    assert query.started_after == datetime(2026, 1, 1, tzinfo=UTC)
    assert not query.newest_first


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("limit=0", "limit"), ("limit=101", "limit"), ("limit=ten", "limit"),
        ("state=running,dead", "state"), ("order=up", "order"),
        ("startedAfter=yesterday", "startedAfter"), ("metadata=novalue", "metadata"),
    ],
)
def test_bad_values_name_the_parameter(raw: str, fragment: str) -> None:
    """Each bad parameter is a 400 whose message names it."""
    with pytest.raises(BadRequest, match=fragment):
        parse_list_query(QueryParams(raw), paginated=True)


def test_parse_metadata_ignores_empty_pairs() -> None:
    """Stray separators are harmless."""
    assert parse_metadata("a=1&&b=2&") == {"a": "1", "b": "2"}
