"""The metrics' parts that need no server: bounded labels, the scrape address check, and
reading a Connect stream's end-of-stream error however the body is cut."""

from __future__ import annotations

import json

import pytest

from bac_server.api.scrape import ScrapeConfigError, parse_address
from bac_server.control.telemetry import OTHER, LabelCap
from bac_server.gateway.metering import ConnectScanner


def test_a_label_keeps_its_first_values_and_counts_the_rest_as_other() -> None:
    cap = LabelCap(2)
    assert [cap(v) for v in ("a", "b", "c", "a", "d", "b")] == ["a", "b", OTHER, "a", OTHER, "b"]


def test_a_scrape_address_beyond_loopback_needs_a_token() -> None:
    assert parse_address("127.0.0.1:9464", "") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:0", "") == ("::1", 0)
    with pytest.raises(ScrapeConfigError, match="BAC_METRICS_TOKEN"):
        parse_address("0.0.0.0:9464", "")
    assert parse_address("0.0.0.0:9464", "t") == ("0.0.0.0", 9464)
    with pytest.raises(ScrapeConfigError, match="host:port"):
        parse_address("9464", "")


def _envelope(flags: int, payload: bytes) -> bytes:
    return bytes([flags]) + len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize("cut", [1, 3, 5, 7, 64])
def test_the_end_of_stream_error_is_found_in_any_cut(cut: int) -> None:
    body = (_envelope(0, b'{"event": "start"}' * 20) + _envelope(0, b"x" * 1000)
            + _envelope(2, json.dumps({"error": {"code": "not_found"}}).encode()))
    scanner = ConnectScanner()
    for at in range(0, len(body), cut):
        scanner.feed(body[at:at + cut])
    assert scanner.code() == "not_found"


def test_a_stream_that_ends_well_has_no_error() -> None:
    scanner = ConnectScanner()
    scanner.feed(_envelope(0, b"{}") + _envelope(2, b"{}"))
    assert scanner.code() is None
