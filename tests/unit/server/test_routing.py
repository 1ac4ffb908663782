"""Gateway routing decisions from headers and host names, and internal-path detection."""

from __future__ import annotations

import pytest

from bac_server.gateway import RoutingError, Target, from_host, is_internal_path, target_of


def _h(**headers: str) -> list[tuple[bytes, bytes]]:
    return [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]


def test_headers_route() -> None:
    """Both routing headers name the target; the API host is ignored."""
    headers = _h(host="127.0.0.1:3000", e2b_sandbox_id="abc123", e2b_sandbox_port="49983")
    assert target_of(headers, "localhost") == Target("abc123", 49983)


def test_host_route_wins_over_headers() -> None:
    """A sandbox host name routes even when headers say otherwise."""
    headers = _h(host="8080-abc.bac.dev", e2b_sandbox_id="zzz", e2b_sandbox_port="1")
    assert target_of(headers, "bac.dev") == Target("abc", 8080)


def test_plain_api_requests_are_not_routed() -> None:
    """No headers and a non-sandbox host: the request is for the API."""
    assert target_of(_h(host="localhost:3000"), "localhost") is None
    assert target_of(_h(host="api.bac.dev"), "bac.dev") is None


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("49983-abc.localhost", Target("abc", 49983)),
        ("49983-ABC.LOCALHOST:3000", Target("abc", 49983)),
        ("3000-abc.localhost.", Target("abc", 3000)),
        ("abc.localhost", None),
        ("49983-abc.other.dev", None),
        ("x.49983-abc.localhost", None),
    ],
)
def test_host_names(host: str, expected: Target | None) -> None:
    """{port}-{id}.{domain}, case-insensitive, optional port and trailing dot."""
    assert from_host(host, "localhost") == expected


@pytest.mark.parametrize(
    "headers",
    [
        _h(e2b_sandbox_id="abc"),
        _h(e2b_sandbox_port="1"),
        _h(e2b_sandbox_id="abc", e2b_sandbox_port="0"),
        _h(e2b_sandbox_id="abc", e2b_sandbox_port="65536"),
        _h(e2b_sandbox_id="abc", e2b_sandbox_port="-1"),
        _h(e2b_sandbox_id="a/b", e2b_sandbox_port="1"),
        _h(e2b_sandbox_id="x" * 65, e2b_sandbox_port="1"),
        _h(host="99999-abc.localhost"),
    ],
)
def test_malformed_targets_are_errors(headers: list[tuple[bytes, bytes]]) -> None:
    """Half a target or a bad id/port is rejected, never guessed."""
    with pytest.raises(RoutingError):
        target_of(headers, "localhost")


@pytest.mark.parametrize(
    ("path", "internal"),
    [
        (b"/init", True), (b"/INIT", True), (b"//init", True), (b"/./init/", True),
        (b"/%69nit", True), (b"/fsfreeze", True), (b"/%ff", True),
        (b"/files", False), (b"/health", False), (b"/process.Process/Start", False),
        (b"/initx", False), (b"/", False),
    ],
)
def test_internal_envd_paths(path: bytes, internal: bool) -> None:
    """Host-only envd routes are recognised however they are spelled; undecodable fails closed."""
    assert is_internal_path(path) is internal
