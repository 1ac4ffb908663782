"""The trace's network events through a real server and the official e2b SDK: the bytes a
sandbox sent and received between two reads of its egress, and each refused destination
it tried, attributed to that sandbox only. Targets are the fake internet's hosts."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2b import Sandbox
from fake_internet import SITE_A, SITE_B, FakeInternet

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))

from bac_process import ServerProcess, running

pytestmark = [pytest.mark.root]


@pytest.fixture(scope="module")
def server(internet: FakeInternet) -> Iterator[ServerProcess]:
    with running("tracenet", BAC_DNS_UPSTREAMS=internet.dns_server, BAC_POOL_SIZE="1",
                 BAC_TRACE_NETWORK_INTERVAL_S="0.3") as srv:
        srv.create_key("tracenet")
        saved = {k: os.environ.get(k) for k in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY")}
        os.environ.update(E2B_API_URL=srv.url, E2B_SANDBOX_URL=srv.url, E2B_API_KEY=srv.keys[0])
        yield srv
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


def _wait(server: ServerProcess, sandbox_id: str,
          match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    headers = {"X-API-KEY": server.keys[0]}
    with httpx.stream("GET", f"{server.url}/sandboxes/{sandbox_id}/trace", headers=headers,
                      params={"follow": "true"}, timeout=30) as response:
        for line in response.iter_lines():
            if line and match(event := json.loads(line)):
                return event
    raise AssertionError("the trace ended without the event")


def test_bytes_and_denials_are_network_events(server: ServerProcess) -> None:
    sbx = Sandbox.create(timeout=120, network={"allow_out": [SITE_A],
                                               "deny_out": ["0.0.0.0/0"]})
    quiet = Sandbox.create(timeout=120)
    try:
        fetched = sbx.commands.run(f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' "
                                   f"http://{SITE_A}/ || true").stdout
        assert fetched == "200"
        refused = sbx.commands.run(f"curl -s -m 2 -o /dev/null -w '%{{http_code}}' "
                                   f"http://{SITE_B}/ || true").stdout
        assert refused == "000"
        traffic = _wait(server, sbx.sandbox_id, lambda e: e["kind"] == "network")
        assert traffic["fields"]["bytes_out"] > 0 and traffic["fields"]["bytes_in"] > 0
        denied = _wait(server, sbx.sandbox_id, lambda e: e["kind"] == "egress_denied")
        assert denied["fields"]["address"] == SITE_B and denied["fields"]["port"] == 80
        assert denied["fields"]["packets"] >= 1 and denied["level"] == "warn"
        headers = {"X-API-KEY": server.keys[0]}
        others = httpx.get(f"{server.url}/sandboxes/{quiet.sandbox_id}/trace", headers=headers,
                           params={"kind": "egress_denied"}).json()["events"]
        assert others == []
    finally:
        sbx.kill()
        quiet.kill()
