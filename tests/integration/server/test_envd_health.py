"""A sandbox whose envd stops answering is marked unhealthy, and healthy once it answers
again, on a real server: envd stopped (SIGSTOP, as a hung envd) from the host; the
health in the list and detail (Bac's field, which Bac's SDK reads; E2B's state stays
running and the official SDK still reads it), an event in the trace and the events API,
and a webhook for each change. The server checks every 0.2 s and calls envd silent for
1.5 s unhealthy."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bac_process import ServerProcess, running
from e2b import Sandbox
from openapi_check import check
from webhook_receiver import Receiver, receiving

import bac

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with running("health", BAC_ENVD_HEALTH_INTERVAL_S="0.2", BAC_ENVD_UNHEALTHY_AFTER_S="1.5",
                 BAC_WEBHOOK_ALLOW="127.0.0.1", BAC_WEBHOOK_POLL_S="0.1") as srv:
        srv.create_key("alpha")
        yield srv


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def _eventually(check_once: Callable[[], Any], what: str, bound_s: float = 30.0) -> Any:
    """``check_once()``'s first truthy answer, polled across the process boundary, bounded."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        found = check_once()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not in {bound_s}s: {what}")


def _envd_pid(server: ServerProcess, sandbox_id: str) -> int:
    """The host pid of the sandbox's envd: its keeper's child running bac_envd."""
    slot = (server.data_dir / "claims" / sandbox_id).read_text()
    keeper = json.loads((server.data_dir / "sandboxes" / slot / "state.json").read_text())[
        "init_pid"]
    for child in Path(f"/proc/{keeper}/task/{keeper}/children").read_text().split():
        if b"bac_envd" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    raise AssertionError("no envd under the keeper")


def test_a_silent_envd_makes_the_sandbox_unhealthy_until_it_answers(
        server: ServerProcess, receiver: Receiver) -> None:
    """SIGSTOP to envd: within the bound the sandbox's health is unhealthy in its detail
    and the list (state still running, the official SDK's get_info unbroken), with an
    unhealthy event (trace, events API) and webhook; SIGCONT: healthy again, likewise."""
    opts = {"api_key": server.keys[0], "api_url": server.url, "sandbox_url": server.url}
    with httpx.Client(base_url=server.url, headers={"X-API-KEY": server.keys[0]},
                      timeout=60) as api:
        hook = api.post("/events/webhooks", json={
            "name": "health", "url": receiver.url("/health"), "enabled": True,
            "events": ["bac.sandbox.unhealthy", "bac.sandbox.healthy"],
            "signatureSecret": "s3cret-for-signatures"})
        assert hook.status_code == 201, hook.text
        sbx = Sandbox.create(timeout=120, **opts)
        detail_route = f"/sandboxes/{sbx.sandbox_id}"
        assert api.get(detail_route).json()["health"] == "healthy"
        envd = _envd_pid(server, sbx.sandbox_id)
        os.kill(envd, signal.SIGSTOP)
        try:
            _eventually(lambda: api.get(detail_route).json()["health"] == "unhealthy",
                        "the detail says unhealthy")
            detail = api.get(detail_route)
            check("get", "/sandboxes/{sandboxID}", detail)
            assert detail.json()["state"] == "running"
            listed = api.get("/v2/sandboxes")
            check("get", "/v2/sandboxes", listed)
            ours = [s for s in listed.json() if s["sandboxID"] == sbx.sandbox_id]
            assert [s["health"] for s in ours] == ["unhealthy"]
            assert Sandbox.get_info(sbx.sandbox_id, **opts).state.value == "running"
            ours_sdk = bac.Sandbox.get_info(sbx.sandbox_id, api_key=server.keys[0],
                                            api_url=server.url)
            assert ours_sdk.health is bac.SandboxHealth.UNHEALTHY
            arrival = receiver.until(lambda a: a.path == "/health")[-1]
            assert arrival.json()["type"] == "bac.sandbox.unhealthy"
            assert arrival.json()["sandboxId"] == sbx.sandbox_id
        finally:
            os.kill(envd, signal.SIGCONT)
        _eventually(lambda: api.get(detail_route).json()["health"] == "healthy",
                    "the detail says healthy again")
        arrival = receiver.until(lambda a: a.path == "/health")[-1]
        assert arrival.json()["type"] == "bac.sandbox.healthy"
        trace = _eventually(lambda: api.get(f"{detail_route}/trace", params={
            "kind": "unhealthy,healthy"}).json()["events"], "both in the trace")
        assert [(e["kind"], e["level"]) for e in trace] == [
            ("unhealthy", "error"), ("healthy", "info")]
        events = api.get(f"/events/sandboxes/{sbx.sandbox_id}", params={
            "types": ["bac.sandbox.unhealthy", "bac.sandbox.healthy"], "orderAsc": "true"})
        assert [e["type"] for e in events.json()] == [
            "bac.sandbox.unhealthy", "bac.sandbox.healthy"]
        assert sbx.commands.run("echo fine").stdout.strip() == "fine"
        sbx.kill()
        assert api.delete(f"/events/webhooks/{hook.json()['id']}").status_code == 204
