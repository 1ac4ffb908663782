"""Every operation of ``spec/openapi.yaml``, fuzzed by schemathesis against a real server
(real store, real sandboxes): no request, valid or not, makes the server answer 5xx, and
every refusal is the API's JSON error shape. The requests carry a real API key and the
operator's token, so they reach the handlers rather than stopping at authentication.

Short form (CI): 6 examples per operation, derandomized (the same requests each run).
Long form (``BAC_RELIABILITY=long``): 100 per operation, random.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from bac_process import ServerProcess, running
from hypothesis import HealthCheck, Phase, settings
from reliability_forms import LONG

pytestmark = [pytest.mark.root, pytest.mark.slow]

SPEC = Path(__file__).resolve().parents[2] / "spec" / "openapi.yaml"
ADMIN_TOKEN = secrets.token_hex(24)
schema = schemathesis.openapi.from_path(SPEC)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with running("fuzz", BAC_ADMIN_TOKEN=ADMIN_TOKEN, BAC_MAX_SANDBOXES_PER_TEAM="20") as srv:
        srv.create_key("fuzz")
        yield srv


@schema.parametrize()
@settings(max_examples=100 if LONG else 6, derandomize=not LONG, deadline=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
def test_no_request_makes_the_server_fail(case: schemathesis.Case,
                                          server: ServerProcess) -> None:
    response = case.call(base_url=server.url, timeout=120, headers={
        "X-API-KEY": server.keys[0], "Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: "
        f"{response.text[:500]}\n{case.as_curl_command()}")
    if response.status_code >= 400 and response.content:
        body = response.json()
        assert isinstance(body, dict) and set(body) >= {"code", "message"}, body
