"""Bad input never crashes the server: every case is a clear JSON 4xx naming the problem,
with Should-Retry: false, and never a 500."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from api_limits import TEAM_LIMIT
from bac_process import ServerProcess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.root


def _assert_error(response: httpx.Response, status: int, *fragments: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == status and isinstance(body["message"], str)
    assert response.headers["should-retry"] == "false"
    for fragment in fragments:
        assert fragment in body["message"], body["message"]


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        (b'{"templateID": "base"', ("not valid JSON",)),
        (b"[1, 2]", ("JSON object",)),
        (b'"base"', ("JSON object",)),
        (b"[" * 100_000 + b"]" * 100_000, ("not valid JSON",)),
        (b"\xff\xfe", ("not valid JSON",)),
        (b'{"timeout": 1e400, "templateID": "base"}', ("timeout",)),
    ],
)
def test_malformed_bodies(api: httpx.Client, raw: bytes, fragments: tuple[str, ...]) -> None:
    """Broken, non-object, absurdly nested or non-UTF-8 JSON is a 400."""
    response = api.post("/v2/sandboxes", content=raw,
                        headers={"Content-Type": "application/json"})
    _assert_error(response, 400, *fragments)


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ({}, ("missing required field 'templateID'",)),
        ({"templateID": 5}, ("templateID",)),
        ({"templateID": ""}, ("templateID",)),
        ({"templateID": "base", "colour": "red"}, ("unknown field 'colour'",)),
        ({"templateID": "base", "timeout": "60"}, ("timeout",)),
        ({"templateID": "base", "timeout": True}, ("timeout",)),
        ({"templateID": "base", "timeout": 1.5}, ("timeout",)),
        ({"templateID": "base", "timeout": -1}, ("timeout must be 0 or more seconds",)),
        ({"templateID": "base", "timeout": 10**30}, ("at most 315360000 seconds",)),
        ({"templateID": "base", "idle": {"after": -5}}, ("idle.after",)),
        ({"templateID": "base", "idle": {"cpuBelowPct": 150}}, ("idle.cpuBelowPct",)),
        ({"templateID": "base", "idle": {"action": "explode"}}, ("idle",)),
        ({"templateID": "base", "cpuCount": 0}, ("cpuCount", "8")),
        ({"templateID": "base", "cpuCount": 1000}, ("cpuCount", "8")),
        ({"templateID": "base", "memoryMB": 1}, ("memoryMB", "64")),
        ({"templateID": "base", "memoryMB": 10**9}, ("memoryMB", "8192")),
        ({"templateID": "base", "metadata": {"k": 1}}, ("metadata",)),
        ({"templateID": "base", "metadata": [1]}, ("metadata",)),
        ({"templateID": "base", "metadata": {str(i): "v" for i in range(100)}}, ("64",)),
        ({"templateID": "base", "metadata": {"k": "v" * 5000}}, ("4096",)),
        ({"templateID": "base", "envVars": {"A=B": "1"}}, ("envVars",)),
        ({"templateID": "base", "envVars": {"A": None}}, ("envVars",)),
        ({"templateID": "base", "autoPause": "yes"}, ("autoPause",)),
        ({"templateID": "base", "autoResume": {"enabled": 1}}, ("autoResume",)),
        ({"templateID": "base", "volumeMounts": [{"name": "v", "path": "v"}]},
         ("volumeMounts", "absolute")),
        ({"templateID": "base", "volumeMounts": [{"name": "v", "path": "/proc/v"}]},
         ("volumeMounts", "/proc")),
        ({"templateID": "base", "network": {"allowOut": ["1.2.3.0/33"]}},
         ("network.allowOut[0]", "1.2.3.0/33")),
        ({"templateID": "base", "network": {"denyOut": ["*.bad..pattern"]}},
         ("network.denyOut[0]",)),
        ({"templateID": "base", "network": {"bogus": 1}}, ("network.bogus",)),
        ({"templateID": "base", "mcp": {"github": {}}},
         ("mcp: the MCP gateway cannot start github", "mcp-gateway", "/mcp endpoint")),
    ],
)
def test_invalid_create_bodies(
    api: httpx.Client, body: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    """Wrong types, unknown fields, out-of-range values and unsupported features are 400s
    naming the field and, for ranges, the limit."""
    _assert_error(api.post("/v2/sandboxes", json=body), 400, *fragments)
    _assert_error(api.post("/sandboxes", json=body), 400, *fragments)


def test_unknown_template_is_404(api: httpx.Client) -> None:
    """A template that does not exist is a 404 naming it."""
    _assert_error(api.post("/v2/sandboxes", json={"templateID": "no-such"}), 404, "no-such")


def test_oversized_body_is_413_naming_the_limit(api: httpx.Client) -> None:
    """A body over 1 MiB is refused with 413 and the limit, declared or streamed."""
    big = json.dumps({"templateID": "base", "metadata": {"k": "v" * (2 << 20)}}).encode()
    _assert_error(api.post("/v2/sandboxes", content=big), 413, "1048576")

    def chunks():  # type: ignore[no-untyped-def]
        yield b'{"templateID": "base", "metadata": {"k": "'
        for _ in range(40):
            yield b"v" * 65536
        yield b'"}}'

    _assert_error(api.post("/v2/sandboxes", content=chunks()), 413, "1048576")


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "fragment"),
    [
        ("POST", "/sandboxes/nosuch/timeout", {"json": {}}, 400, "timeout"),
        ("POST", "/sandboxes/nosuch/timeout", {"json": {"timeout": 5}}, 404, "nosuch"),
        ("POST", "/sandboxes/nosuch/connect", {"json": {}}, 400, "timeout"),
        ("POST", "/v2/sandboxes/nosuch/connect", {"json": {"timeout": "x"}}, 400, "timeout"),
        ("POST", "/sandboxes/nosuch/refreshes", {"json": {"duration": -3}}, 400, "duration"),
        ("POST", "/sandboxes/nosuch/refreshes", {"json": {"duration": 3}}, 404, "nosuch"),
        ("GET", "/v2/sandboxes", {"params": {"limit": 0}}, 400, "limit"),
        ("GET", "/v2/sandboxes", {"params": {"limit": "ten"}}, 400, "limit"),
        ("GET", "/v2/sandboxes", {"params": {"state": "gone"}}, 400, "state"),
        ("GET", "/v2/sandboxes", {"params": {"order": "up"}}, 400, "order"),
        ("GET", "/v2/sandboxes", {"params": {"nextToken": "garbage!"}}, 400, "nextToken"),
        ("GET", "/v2/sandboxes", {"params": {"startedAfter": "yesterday"}}, 400, "startedAfter"),
        ("GET", "/v2/sandboxes", {"params": {"metadata": "novalue"}}, 400, "metadata"),
        ("GET", "/sandboxes/x/metrics", {"params": {"start": "soon"}}, 400, "start"),
        ("GET", "/sandboxes/x/metrics", {"params": {"start": 10**20}}, 400, "start"),
        ("GET", "/sandboxes/x/metrics", {"params": {"start": 5, "end": 1}}, 400, "start"),
        ("GET", "/sandboxes/metrics", {}, 400, "sandbox_ids"),
        ("GET", "/v2/sandboxes/x/logs", {"params": {"direction": "up"}}, 400, "direction"),
        ("GET", "/v2/sandboxes/x/logs", {"params": {"limit": -1}}, 400, "limit"),
        ("GET", "/sandboxes/x/logs", {"params": {"start": "x"}}, 400, "start"),
        ("GET", "/no/such/route", {}, 404, ""),
        ("PUT", "/v2/sandboxes", {}, 405, ""),
    ],
)
def test_bad_requests_on_other_routes(
    api: httpx.Client, method: str, path: str, kwargs: dict[str, Any], status: int,
    fragment: str,
) -> None:
    """Each endpoint validates its body and query and answers a JSON error naming the field."""
    _assert_error(api.request(method, path, **kwargs), status, fragment)


@pytest.mark.parametrize("key", [None, "", "e2b_" + "0" * 40, "not-a-key", "é" * 10])
def test_missing_or_wrong_key_is_401(server: ServerProcess, key: str | None) -> None:
    """No key, or a key that was never issued, is a 401 on every route."""
    headers = {} if key is None else {"X-API-KEY": key.encode()}
    for method, path in (("POST", "/v2/sandboxes"), ("GET", "/v2/sandboxes"),
                         ("GET", "/sandboxes/x"), ("DELETE", "/sandboxes/x")):
        response = httpx.request(method, server.url + path, headers=headers, json={})
        _assert_error(response, 401)


def test_team_limit_is_429(api: httpx.Client) -> None:
    """Creating past the per-team limit is a 429 naming it, without retries advised."""
    made = []
    try:
        for _ in range(TEAM_LIMIT):
            created = api.post("/v2/sandboxes", json={"templateID": "base"})
            assert created.status_code == 201, created.text
            made.append(created.json()["sandboxID"])
        _assert_error(api.post("/v2/sandboxes", json={"templateID": "base"}), 429,
                      str(TEAM_LIMIT))
    finally:
        for sid in made:
            api.delete(f"/sandboxes/{sid}")
    created = api.post("/v2/sandboxes", json={"templateID": "base"})
    assert created.status_code == 201
    api.delete(f"/sandboxes/{created.json()['sandboxID']}")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                  max_size=3),
    max_leaves=8,
)
_keys = st.sampled_from(
    ["templateID", "timeout", "metadata", "envVars", "cpuCount", "memoryMB", "network",
     "autoPause", "secure", "allow_internet_access", "volumeMounts", "mcp", "iam", "other"]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.dictionaries(_keys, _json, max_size=6))
def test_fuzzed_create_bodies_never_500(api: httpx.Client, body: dict[str, Any]) -> None:
    """Random create bodies get a 4xx JSON error (templates other than 'base' do not exist)."""
    if body.get("templateID") == "base":
        body["templateID"] = "not-base"
    response = api.post("/v2/sandboxes", json=body)
    assert response.status_code in (400, 404), response.text
    assert response.json()["code"] == response.status_code


def test_a_client_gone_before_its_body_is_no_server_error(server: ServerProcess) -> None:
    """A create whose client closes the connection halfway through its body is logged as
    such, never as an unhandled error."""
    import socket
    import time
    from urllib.parse import urlsplit

    where = urlsplit(server.url)
    with socket.create_connection((where.hostname, where.port)) as sock:
        sock.sendall(b"POST /sandboxes HTTP/1.1\r\nHost: localhost\r\n"
                     + f"X-API-Key: {server.keys[0]}\r\n".encode()
                     + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tem")
    deadline = time.monotonic() + 10
    while "before its request's body arrived" not in server.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, server.log_tail()
        time.sleep(0.05)
    tail = server.log_tail(200)
    assert "unhandled error" not in tail and "Exception in ASGI application" not in tail
