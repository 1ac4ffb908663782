"""List queries encode filters exactly as E2B's SDK does, and reject bad input early."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qs, unquote, urlencode

import httpx
import pytest

from bac import InvalidArgumentError, SandboxQuery, SandboxState
from bac._config import ConnectionConfig
from bac._paginator import AsyncSandboxPaginator, list_params, metadata_filter


def _server_decode(query_string: str) -> dict[str, str]:
    """Decode ``metadata`` the way the server (and E2B's infra) does."""
    value = parse_qs(query_string)["metadata"][0]
    pairs = unquote(value).split("&")
    return {unquote(k): unquote(v) for k, v in (p.split("=", 1) for p in pairs)}


@pytest.mark.parametrize(
    "metadata",
    [{"k": "v"}, {"k": "v w"}, {"a&b": "c=d", "ü": "%20"}, {"job": "42", "user": "x/y"}],
)
def test_metadata_round_trips_through_two_encodings(metadata: dict[str, str]) -> None:
    """Whatever the metadata holds, the server's double decoding recovers it exactly."""
    url = httpx.URL("http://h/v2/sandboxes", params={"metadata": metadata_filter(metadata)})
    assert _server_decode(url.query.decode()) == metadata


def test_metadata_encoding_matches_e2b() -> None:
    """Same bytes as the official SDK: per-pair quoting, then urlencode."""
    from urllib.parse import quote

    metadata = {"k": "v w", "x": "1"}
    expected = urlencode({quote(k): quote(v) for k, v in metadata.items()})
    assert metadata_filter(metadata) == expected == "k=v%2520w&x=1"


def test_only_given_filters_are_sent() -> None:
    """An empty query sends no parameters, so the server applies its defaults."""
    assert list_params(None, None, None, None) == {}
    assert list_params(SandboxQuery(), None, None, None) == {}


def test_all_filters() -> None:
    """Every filter and paging option maps to its query parameter."""
    after = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    query = SandboxQuery(
        metadata={"a": "1"},
        state=[SandboxState.RUNNING, SandboxState.PAUSED],
        template="base",
        started_after=after,
    )
    params = list_params(query, 5, "tok", "asc")
    assert params["state"] == "running,paused"
    assert params["template"] == "base"
    assert datetime.fromisoformat(params["startedAfter"]) == after
    assert (params["limit"], params["nextToken"], params["order"]) == ("5", "tok", "asc")


@pytest.mark.parametrize(("limit", "order"), [(0, None), (101, None), (5, "sideways")])
def test_bad_paging_is_rejected_before_any_request(limit: int, order: str | None) -> None:
    """A bad limit or order fails when the paginator is built, with the value named."""
    with pytest.raises(InvalidArgumentError):
        AsyncSandboxPaginator(ConnectionConfig(api_key="k"), limit=limit, order=order)  # type: ignore[arg-type]


async def test_exhausted_paginator_refuses_more() -> None:
    """next_items after the last page is a clear error, not a silent extra request."""
    paginator = AsyncSandboxPaginator(ConnectionConfig(api_key="k"))
    paginator._has_next = False
    assert paginator.next_token is None
    with pytest.raises(InvalidArgumentError, match="has_next"):
        await paginator.next_items()
