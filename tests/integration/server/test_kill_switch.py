"""The operator's kill switch on the real server (in this process: store, backend, gateway,
API) with real sandboxes, driven over HTTP, the official SDK and ``bac fleet``:

* a pause on a selector freezes every sandbox it matches and no other, holds them (their
  team cannot resume them, nor can traffic) and writes them to disk with their memory;
  released, they resume where they were (a process's memory survives);
* a kill on a selector ends its sandboxes, paused ones too, and leaves the others;
* the admin routes take the operator's token only: a team's key is refused (403), no
  token or a wrong one too (401), an empty selector is a 400; all JSON;
* ``bac fleet``: the switch from the command line, its exit codes and one-line errors.

The test waits on the control plane only for the switch's background work (the writes to
disk, the ends) to finish, and on the backend for the writes to reach the disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from e2b import AsyncSandbox
from inprocess_server import InProcessServer, inprocess_server
from openapi_check import check

from bac_server.backends.namespaces import NamespaceBackend, testing
from bac_server.control import PauseKind

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

TOKEN = "kill-switch-test-token-" + "x" * 24
MATCHED = 24  # sandboxes the pause selects, in two teams
OTHERS = 4  # sandboxes it must leave running
# A process whose memory is the test's evidence: a value made when it started, written
# out only when asked (SIGUSR1); a sandbox that lost its memory cannot answer the same.
KEEPER = ("setsid sh -c 'v=$$-$(od -An -N8 -tx8 /dev/urandom | tr -d \" \"); "
          "trap \"echo $v > /tmp/v\" USR1; echo $$ > /tmp/keeper; "
          "while :; do sleep 0.2; done' </dev/null >/dev/null 2>&1 & "
          # Back once its trap is set (it writes its pid after): a signal before would end it.
          "until [ -s /tmp/keeper ]; do sleep 0.01; done")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[InProcessServer]:
    async with inprocess_server("kill-switch", teams=("alpha", "beta"),
                                admin_token=TOKEN) as srv:
        yield srv


def _admin(server: InProcessServer, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=120, headers=headers)


async def _switch(server: InProcessServer, action: str, **selector: Any) -> dict[str, Any]:
    async with _admin(server, Authorization=f"Bearer {TOKEN}") as api:
        done = await api.post(f"/admin/fleet/{action}", json=selector)
    assert done.status_code == 200, done.text
    check("POST", f"/admin/fleet/{action}", done)
    answer: dict[str, Any] = done.json()
    return answer


async def _create(server: InProcessServer, team: int, **metadata: str) -> str:
    async with httpx.AsyncClient(base_url=server.url, timeout=180,
                                 headers={"X-API-KEY": server.keys[team]}) as api:
        made = await api.post("/v2/sandboxes", json={"templateID": "base", "timeout": 3600,
                                                     "metadata": metadata})
    assert made.status_code == 201, made.text
    return str(made.json()["sandboxID"])


async def _create_many(server: InProcessServer, count: int, team: int,
                       **metadata: str) -> list[str]:
    gate = asyncio.Semaphore(4)

    async def one() -> str:
        async with gate:
            return await _create(server, team, **metadata)

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def _state(server: InProcessServer, team: int, sandbox_id: str) -> str:
    async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                 headers={"X-API-KEY": server.keys[team]}) as api:
        found = await api.get(f"/sandboxes/{sandbox_id}")
    if found.status_code == 404:
        return "gone"
    assert found.status_code == 200, found.text
    return str(found.json()["state"])


async def _remembered(sbx: AsyncSandbox) -> str:
    """What the keeper process holds in memory (it writes it on SIGUSR1)."""
    await sbx.commands.run("rm -f /tmp/v; kill -USR1 $(cat /tmp/keeper)")
    done = await sbx.commands.run("for i in $(seq 100); do [ -s /tmp/v ] && break; "
                                  "sleep 0.1; done; cat /tmp/v")
    assert done.stdout.strip(), "the keeper did not answer"
    return done.stdout.strip()


def _backend(server: InProcessServer) -> NamespaceBackend:
    backend = server.plane.backend
    assert isinstance(backend, NamespaceBackend)
    return backend


async def test_the_admin_routes_take_the_operators_token_only(server: InProcessServer) -> None:
    """A team's key is not an admin credential: 403 with it (also alongside a bearer that
    is not the token), 401 without any credential or with a wrong token, the team key sent
    as the bearer included; a selector without a filter is a 400. Every refusal is JSON,
    and nothing was paused."""
    team_key = server.keys[0]
    victim = await _create(server, 0, kind="bystander")
    cases: list[tuple[dict[str, str], int]] = [
        ({"X-API-KEY": team_key}, 403),
        ({}, 401),
        ({"Authorization": "Bearer not-the-token"}, 401),
        ({"Authorization": f"Bearer {team_key}"}, 401),
        ({"Authorization": f"Basic {TOKEN}", "X-API-KEY": team_key}, 403),
        ({"Authorization": f"Bearer {TOKEN[:-1]}"}, 401),
    ]
    for headers, status in cases:
        async with _admin(server, **headers) as api:
            for action in ("pause", "kill", "release"):
                refused = await api.post(f"/admin/fleet/{action}", json={"all": True})
                assert refused.status_code == status, (headers, action, refused.text)
                check("POST", f"/admin/fleet/{action}", refused)
                body = refused.json()
                assert body["code"] == status and body["message"], body
    async with _admin(server, Authorization=f"Bearer {TOKEN}") as api:
        selectors: list[dict[str, object]] = [
            {}, {"all": False}, {"all": True, "team": "alpha"}, {"metadata": {}},
            {"team": ""}, {"teams": "alpha"}, {"all": "yes"}]
        for selector in selectors:
            bad = await api.post("/admin/fleet/pause", json=selector)
            assert bad.status_code == 400, (selector, bad.text)
            check("POST", "/admin/fleet/pause", bad)
        garbage = await api.post("/admin/fleet/kill", content=b"{not json")
        assert garbage.status_code == 400 and garbage.json()["code"] == 400
    assert await _state(server, 0, victim) == "running"
    await AsyncSandbox.kill(victim, **server.opts())


async def test_pause_freezes_the_selection_holds_it_and_saves_its_memory(
        server: InProcessServer) -> None:
    """24 sandboxes of run r1 in two teams, 4 others (run r2, or no run). The pause answers
    once all 24 are frozen and their rows written, with their ids; the 4 keep running and
    answer commands. Each of the
    24 has a paused event with reason kill_switch; its team's resume is refused (409) and
    traffic does not resume it. In the background each is written to disk with its memory;
    released, one resumes through the official SDK and its process still holds the value
    it made before the pause."""
    matched = (await _create_many(server, MATCHED // 2, 0, run_id="r1")
               + await _create_many(server, MATCHED // 2, 1, run_id="r1"))
    others = (await _create_many(server, OTHERS // 2, 0, run_id="r2")
              + await _create_many(server, OTHERS // 2, 1))
    keeper = await AsyncSandbox.connect(matched[0], **server.opts(0))
    await keeper.commands.run(KEEPER)
    before = await _remembered(keeper)
    try:
        done = await _switch(server, "pause", metadata={"run_id": "r1"})
        assert done["action"] == "pause" and done["mode"] == "disk", done
        assert done["count"] == MATCHED and sorted(done["sandboxIDs"]) == sorted(matched)
        assert done["failed"] == []
        # Frozen when the answer came: paused on the API, frozen in the backend.
        for sandbox_id in matched:
            team = 0 if matched.index(sandbox_id) < MATCHED // 2 else 1
            assert await _state(server, team, sandbox_id) == "paused"
        for sandbox_id in others:
            team = 0 if others.index(sandbox_id) < OTHERS // 2 else 1
            assert await _state(server, team, sandbox_id) == "running"
        # Their rows say so too (what a restart reads), held.
        for sandbox_id in matched:
            row = await server.plane.sandbox_store.get_sandbox(sandbox_id)
            assert row is not None and row.state == "paused", row
            assert (row.lifecycle or {}).get("held") == "kill_switch", row.lifecycle
        bystander = await AsyncSandbox.connect(others[0], **server.opts(0))
        assert (await bystander.commands.run("echo still")).stdout == "still\n"
        # Held: the team cannot resume it, nor can traffic.
        async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                     headers={"X-API-KEY": server.keys[0]}) as api:
            refused = await api.post(f"/sandboxes/{matched[0]}/resume", json={"timeout": 60})
            assert refused.status_code == 409 and "kill switch" in refused.json()["message"]
            refused = await api.post(f"/sandboxes/{matched[1]}/connect", json={"timeout": 60})
            assert refused.status_code == 409, refused.text
            events = await api.get(f"/events/sandboxes/{matched[0]}")
            traced = await api.get(f"/sandboxes/{matched[0]}/trace", params={"kind": "paused"})
        assert events.json()[0]["type"] == "sandbox.lifecycle.paused", events.text
        fields = [e["fields"] for e in traced.json()["events"]]
        assert fields and fields[-1]["reason"] == "kill_switch", fields
        # Written to disk with their memory, in the background.
        await server.plane.kill_switch.settled()
        for sandbox_id in matched:
            await testing.suspend_flushed(_backend(server), sandbox_id)
            sbx = server.plane.registry.get(sandbox_id)
            assert sbx is not None and sbx.paused_as is PauseKind.DISK, sandbox_id
        async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                     headers={"X-API-KEY": server.keys[0]}) as api:
            saved = (await api.get(f"/sandboxes/{matched[0]}/trace",
                                   params={"kind": "saved"})).json()["events"]
        assert len(saved) == 1 and saved[0]["fields"]["mode"] == "disk", saved
        assert int(saved[0]["fields"]["bytes"]) > 1024 * 1024
        released = await _switch(server, "release", metadata={"run_id": "r1"})
        assert sorted(released["sandboxIDs"]) == sorted(matched)
        assert await _state(server, 0, matched[0]) == "paused"  # released, not resumed
        resumed = await AsyncSandbox.connect(matched[0], **server.opts(0))
        assert await _remembered(resumed) == before
    finally:
        await _switch(server, "kill", all=True)
        await server.plane.kill_switch.settled()


async def test_kill_ends_the_selection_paused_ones_too_and_spares_the_rest(
        server: InProcessServer) -> None:
    """A kill on team beta ends its running and its paused sandboxes (each with a killed
    event) and leaves alpha's running."""
    betas = await _create_many(server, 6, 1, job="k")
    alphas = await _create_many(server, 2, 0, job="k")
    async with httpx.AsyncClient(base_url=server.url, timeout=120,
                                 headers={"X-API-KEY": server.keys[1]}) as api:
        paused = await api.post(f"/sandboxes/{betas[0]}/pause")
    assert paused.status_code == 204, paused.text
    try:
        done = await _switch(server, "kill", team="beta")
        assert done["action"] == "kill" and sorted(done["sandboxIDs"]) == sorted(betas)
        await server.plane.kill_switch.settled()
        for sandbox_id in betas:
            assert await _state(server, 1, sandbox_id) == "gone"
        for sandbox_id in alphas:
            assert await _state(server, 0, sandbox_id) == "running"
        async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                     headers={"X-API-KEY": server.keys[1]}) as api:
            events = await api.get(f"/events/sandboxes/{betas[1]}")
            traced = await api.get(f"/sandboxes/{betas[0]}/trace", params={"kind": "killed"})
        assert events.json()[0]["type"] == "sandbox.lifecycle.killed", events.text
        assert [e["fields"]["reason"] for e in traced.json()["events"]] == ["kill_switch"]
    finally:
        await _switch(server, "kill", all=True)
        await server.plane.kill_switch.settled()


async def _bac(server: InProcessServer, *args: str,
               token: str | None = TOKEN) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "BAC_"))}
    env.update(BAC_API_URL=server.url, BAC_API_KEY=server.keys[0])
    if token is not None:
        env["BAC_ADMIN_TOKEN"] = token
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from bac.cli import main; main()", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_bac_fleet_pauses_releases_and_kills_with_exit_codes(
        server: InProcessServer) -> None:
    """`bac fleet pause --metadata` then `release` and `kill --template`: exit 0, the ids
    on stdout (JSON with --json); no selector or two kinds of it: a usage error (2); no
    admin token, a wrong one, or only a team key: exit 3 with one line on stderr."""
    mine = await _create_many(server, 3, 0, fleet="cli")
    spared = await _create(server, 0, fleet="other")
    try:
        code, out, err = await _bac(server, "fleet", "pause", "--metadata", "fleet=cli")
        assert code == 0, err
        assert out.startswith("paused 3 sandbox(es)") and set(out.split()) >= set(mine), out
        assert await _state(server, 0, spared) == "running"
        code, out, err = await _bac(server, "fleet", "release", "--metadata", "fleet=cli",
                                    "--json")
        assert code == 0, err
        assert sorted(json.loads(out)["sandboxIDs"]) == sorted(mine)
        for args in (("fleet", "pause"), ("fleet", "kill", "--all", "--team", "alpha"),
                     ("fleet", "kill", "--metadata", "novalue")):
            code, _, err = await _bac(server, *args)
            assert code == 2 and "Error:" in err, (args, err)
        for token in (None, "wrong-token"):
            code, out, err = await _bac(server, "fleet", "kill", "--all", token=token)
            assert code == 3 and out == "", (token, out, err)
            assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
        assert await _state(server, 0, spared) == "running"
        code, out, err = await _bac(server, "fleet", "kill", "--template", "base")
        assert code == 0 and out.startswith("killing"), err
        await server.plane.kill_switch.settled()
        for sandbox_id in [*mine, spared]:
            assert await _state(server, 0, sandbox_id) == "gone"
    finally:
        await _switch(server, "kill", all=True)
        await server.plane.kill_switch.settled()
