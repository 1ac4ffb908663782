"""Cost caps on a simulated clock: the real server in this process, real sandboxes (paused
with their memory by the real backend), and a clock the test moves in quarter seconds, so
"acted on within 1 s of crossing" is checked at simulated times, never by sleeping.

* a sandbox's own cap warns at 80 %, pauses it at 100 % within 1 s with nothing lost (a
  file and a running process), refuses its resume (403) until the cap is raised, then it
  resumes as it was;
* the 80 % warning reaches the team's webhook, signed, with the cap's figures;
* a team's daily cap with ``kill`` ends its sandboxes and refuses new ones until raised;
  a group's cap covers every sandbox with its metadata pair and no other;
* bad caps are 400s naming the field.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from e2b import AsyncSandbox
from inprocess_server import InProcessServer, inprocess_server
from webhook_receiver import Arrival, e2b_signature, receiving

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

# 1 vCPU and 512 MiB cost 0.5 + 0.125 = 0.625 a second.
PRICES = {"price_vcpu_second": 0.5, "price_memory_gib_second": 0.25}
RATE = 0.625
STEP = 0.25


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[InProcessServer]:
    # Webhooks to the test's receiver on loopback, polled every 0.1 s (of real time).
    async with inprocess_server("caps", teams=("alpha", "beta", "gamma", "delta"),
                                webhook_allow="127.0.0.1", webhook_poll_s=0.1,
                                **PRICES) as srv:
        yield srv


def _api(server: InProcessServer, team: int = 0) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=120,
                             headers={"X-API-KEY": server.keys[team]})


async def _create(api: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await api.post("/v2/sandboxes", json={"templateID": "base", "timeout": 0,
                                                 "cpuCount": 1, "memoryMB": 512, **body})


async def _state(api: httpx.AsyncClient, sid: str) -> str:
    found = await api.get(f"/sandboxes/{sid}")
    return "gone" if found.status_code == 404 else str(found.json()["state"])


async def _step(server: InProcessServer) -> None:
    """A quarter second of simulated time, and whatever caps it made act."""
    await server.advance(STEP)
    caps = server.plane.caps
    assert caps is not None
    await caps.settle()


async def _until(server: InProcessServer, api: httpx.AsyncClient, sid: str, state: str,
                 *, within_s: float) -> float:
    """Step the clock until the sandbox is in ``state``; the simulated seconds it took."""
    waited = 0.0
    while await _state(api, sid) != state:
        assert waited < within_s, f"{sid} not {state} after {waited} simulated seconds"
        await _step(server)
        waited += STEP
    return waited


async def test_a_sandbox_cap_warns_pauses_in_time_and_loses_nothing(
        server: InProcessServer) -> None:
    async with _api(server) as api:
        made = await _create(api, costCap={"limit": 10 * RATE})  # crossed at 10 s
        assert made.status_code == 201, made.text
        sid = made.json()["sandboxID"]
        try:
            sbx = await AsyncSandbox.connect(sid, **server.opts())
            await sbx.files.write("/tmp/kept", "still here")
            await sbx.commands.run("sleep 100000", background=True)
            caps = (await api.get(f"/sandboxes/{sid}/usage")).json()["caps"]
            assert [(c["scope"], c["limit"], c["action"], c["state"]) for c in caps] == [
                ("sandbox", 10 * RATE, "pause", "ok")]
            cap_id = caps[0]["capID"]
            paused_after = await _until(server, api, sid, "paused", within_s=12)
            # Crossed at 10 s; acted on within 1 s of it.
            assert 10.0 <= paused_after <= 11.0
            cap = (await api.get(f"/caps/{cap_id}")).json()
            assert cap["state"] == "reached" and cap["spent"] >= cap["limit"]
            assert cap["spent"] <= cap["limit"] + RATE  # it stopped spending at once
            trace = (await api.get(f"/sandboxes/{sid}/trace",
                                   params={"kind": "warning,paused"})).json()["events"]
            warned = [e for e in trace if e["kind"] == "warning"]
            assert len(warned) == 1 and warned[0]["fields"]["cap_id"] == cap_id
            assert warned[0]["fields"]["percent"] == "80"
            assert "cost cap" in trace[-1]["message"] and trace[-1]["kind"] == "paused"
            await server.advance(3600)  # held: nothing resumes it, nothing accrues
            refused = await api.post(f"/sandboxes/{sid}/resume", json={"timeout": 600})
            assert refused.status_code == 403, refused.text
            assert cap_id in refused.json()["message"]
            raised = await api.patch(f"/caps/{cap_id}", json={"limit": 100})
            assert raised.status_code == 200 and raised.json()["state"] == "ok"
            resumed = await api.post(f"/sandboxes/{sid}/resume", json={"timeout": 600})
            assert resumed.status_code == 201, resumed.text
            sbx = await AsyncSandbox.connect(sid, **server.opts())
            assert await sbx.files.read("/tmp/kept") == "still here"
            assert (await sbx.commands.run("pgrep -x sleep")).exit_code == 0
        finally:
            await api.delete(f"/sandboxes/{sid}")


async def test_the_warning_reaches_a_webhook_signed(server: InProcessServer) -> None:
    secret = "caps-webhook-secret"
    with receiving() as receiver:
        async with _api(server, team=3) as api:
            hook = await api.post("/events/webhooks", json={
                "name": "caps", "url": receiver.url("/caps"), "enabled": True,
                "events": ["bac.sandbox.warning"], "signatureSecret": secret})
            assert hook.status_code == 201, hook.text
            made = await _create(api, costCap={"limit": 10 * RATE, "action": "kill"})
            assert made.status_code == 201, made.text
            sid = made.json()["sandboxID"]
            try:
                await server.advance(7.5)
                assert (await api.get(f"/sandboxes/{sid}/trace",
                                      params={"kind": "warning"})).json()["events"] == []
                while not (await api.get(f"/sandboxes/{sid}/trace",
                                         params={"kind": "warning"})).json()["events"]:
                    await _step(server)

                def warned(arrival: Arrival) -> bool:
                    return arrival.path == "/caps" and arrival.json()["sandboxId"] == sid

                arrival = (await asyncio.to_thread(receiver.until, warned))[-1]
                body = arrival.json()
                assert body["type"] == "bac.sandbox.warning"
                assert arrival.headers["e2b-signature"] == e2b_signature(secret, arrival.body)
                fields = body["eventData"]["fields"]
                assert fields["percent"] == "80" and fields["reason"] == "cap"
                assert float(fields["limit"]) == pytest.approx(10 * RATE)
                assert 8 * RATE <= float(fields["spent"]) <= 8 * RATE + 2 * STEP * RATE
            finally:
                await api.delete(f"/sandboxes/{sid}")
                await api.delete(f"/events/webhooks/{hook.json()['id']}")


async def test_a_team_day_cap_kills_and_refuses_until_raised(server: InProcessServer) -> None:
    async with _api(server, team=1) as api:
        cap = await api.post("/caps", json={"scope": "team", "period": "day",
                                            "limit": 2 * RATE, "action": "kill"})
        assert cap.status_code == 201, cap.text
        cap_id = cap.json()["capID"]
        assert cap.json()["periodStart"] is not None
        made = await _create(api)
        assert made.status_code == 201, made.text
        sid = made.json()["sandboxID"]
        assert await _until(server, api, sid, "gone", within_s=3.5) <= 3.0
        logs = (await api.get(f"/v2/sandboxes/{sid}/logs")).json()["logs"]
        assert logs[-1]["fields"].get("reason") == "cap"
        refused = await _create(api)
        assert refused.status_code == 403 and "cost cap" in refused.json()["message"]
        assert (await api.patch(f"/caps/{cap_id}", json={"limit": 1000})).status_code == 200
        again = await _create(api)
        assert again.status_code == 201, again.text
        await api.delete(f"/sandboxes/{again.json()['sandboxID']}")
        assert (await api.delete(f"/caps/{cap_id}")).status_code == 204
        assert (await api.get(f"/caps/{cap_id}")).status_code == 404


async def test_a_group_cap_covers_its_metadata_pair_only(server: InProcessServer) -> None:
    async with _api(server, team=2) as api:
        cap = await api.post("/caps", json={"scope": "group", "metadata": {"run": "r-1"},
                                            "limit": 4 * RATE})
        assert cap.status_code == 201, cap.text
        ids = []
        for run in ("r-1", "r-1", "r-2"):
            made = await _create(api, metadata={"run": run})
            assert made.status_code == 201, made.text
            ids.append(made.json()["sandboxID"])
        try:
            # Two sandboxes of the group spend 2 x RATE a second: crossed at 2 s.
            assert await _until(server, api, ids[0], "paused", within_s=3.5) <= 3.0
            assert await _state(api, ids[1]) == "paused"
            assert await _state(api, ids[2]) == "running"
            listed = (await api.get("/caps")).json()
            assert [c["state"] for c in listed] == ["reached"]
        finally:
            for sid in ids:
                await api.delete(f"/sandboxes/{sid}")


@pytest.mark.parametrize("body, names", [
    ({"scope": "team", "limit": 1}, "team"),
    ({"scope": "group", "limit": 1}, "metadata"),
    ({"scope": "group", "metadata": {"a": "1", "b": "2"}, "limit": 1}, "metadata"),
    ({"scope": "sandbox", "limit": 1}, "sandboxID"),
    ({"scope": "team", "period": "day", "limit": 0}, "limit"),
    ({"scope": "team", "period": "day", "limit": 1, "action": "stop"}, "action"),
    ({"scope": "planet", "limit": 1}, "scope"),
])
async def test_bad_caps_are_400s(server: InProcessServer, body: dict[str, Any],
                                 names: str) -> None:
    async with _api(server) as api:
        answer = await api.post("/caps", json=body)
    assert answer.status_code == 400, answer.text
    assert names in answer.json()["message"]
