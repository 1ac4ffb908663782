"""The REST client retries exactly what the server allows, and waits as it asks."""

from __future__ import annotations

import httpx
import pytest

from bac._api import _backoff, _should_retry


def _response(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (429, {}, True),
        (502, {}, True),
        (503, {}, True),
        (504, {}, True),
        (500, {}, False),
        (404, {}, False),
        (503, {"Should-Retry": "false"}, False),
        (500, {"Should-Retry": "true"}, True),
        (409, {"Should-Retry": "TRUE"}, True),
    ],
)
def test_should_retry(status: int, headers: dict[str, str], expected: bool) -> None:
    """Should-Retry decides when present; otherwise only 429/502/503/504 are retried."""
    assert _should_retry(_response(status, **headers)) is expected


def test_retry_after_is_honoured_and_capped() -> None:
    """A numeric Retry-After is used as is, up to 30 s."""
    assert _backoff(_response(429, **{"Retry-After": "2"}), 0) == 2.0
    assert _backoff(_response(429, **{"Retry-After": "3600"}), 0) == 30.0


def test_exponential_backoff_with_jitter() -> None:
    """Without Retry-After the wait grows with the attempt and stays within its bounds."""
    for attempt in range(8):
        base = min(0.1 * 2**attempt, 10.0)
        wait = _backoff(_response(503), attempt)
        assert base / 2 <= wait <= base
