"""Lifetimes without a wall, on a simulated clock: the real server (store, backend,
gateway, API) in this process, real sandboxes driven by the official SDK, and a clock the
test moves instead of sleeping (``inprocess_server``).

* a sandbox created without an end (timeout 0) outlives 48 simulated hours; its idle
  policy pauses it (never kills it) and traffic resumes it;
* a sandbox with an idle policy is paused after its idle time with no traffic, not while a
  command streams or its CPU is busy, and resumed by traffic;
* a timeout still ends a sandbox at its time (the clock drives the timers);
* ``bac exec`` leaves a sandbox's end where it was.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from e2b import AsyncSandbox
from inprocess_server import InProcessServer, inprocess_server

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

HOUR = 3600.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[InProcessServer]:
    # The defaults but a shorter CPU window: sandboxes without an end pause after 900 s
    # idle, those with an end never do unless they ask.
    async with inprocess_server("lifetime", idle_cpu_window_s=0.3) as srv:
        yield srv


async def _state(server: InProcessServer, sandbox_id: str) -> str:
    async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                 headers={"X-API-KEY": server.keys[0]}) as api:
        found = await api.get(f"/sandboxes/{sandbox_id}")
    if found.status_code == 404:
        return "gone"
    assert found.status_code == 200, found.text
    return str(found.json()["state"])


async def _create(server: InProcessServer, **body: object) -> str:
    """A sandbox made through the REST API with Bac's fields (the SDK has no idle policy)."""
    async with httpx.AsyncClient(base_url=server.url, timeout=120,
                                 headers={"X-API-KEY": server.keys[0]}) as api:
        made = await api.post("/v2/sandboxes", json={"templateID": "base", **body})
    assert made.status_code == 201, made.text
    return str(made.json()["sandboxID"])


async def _logs(server: InProcessServer, sandbox_id: str) -> list[str]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                 headers={"X-API-KEY": server.keys[0]}) as api:
        found = await api.get(f"/v2/sandboxes/{sandbox_id}/logs")
    assert found.status_code == 200, found.text
    return [entry["message"] for entry in found.json()["logs"]]


async def test_a_sandbox_without_an_end_outlives_48_simulated_hours(
        server: InProcessServer) -> None:
    """timeout=0 from the official SDK: no end; after 48 simulated hours the sandbox is
    still there (paused by its default idle policy, never killed) and a command resumes it
    and runs; one without an idle policy stays running all along."""
    idle_default = await AsyncSandbox.create(timeout=0, **server.opts())
    always_on = await _create(server, timeout=0, idle={"after": 0})
    try:
        assert (await idle_default.get_info()).end_at.year == 9999
        for _ in range(48):
            await server.advance(HOUR)
            assert await _state(server, always_on) == "running"
            assert await _state(server, idle_default.sandbox_id) == "paused"
        assert (await idle_default.commands.run("echo alive")).stdout == "alive\n"
        assert await _state(server, idle_default.sandbox_id) == "running"
        attached = await AsyncSandbox.connect(always_on, **server.opts())
        assert (await attached.commands.run("echo still here")).stdout == "still here\n"
        logs = await _logs(server, idle_default.sandbox_id)
        assert any("paused (idle policy)" in line for line in logs), logs
    finally:
        await idle_default.kill()
        await AsyncSandbox.kill(always_on, **server.opts())


async def test_a_timeout_still_ends_the_sandbox_on_the_clock(server: InProcessServer) -> None:
    """The end of a sandbox with a timeout comes on the control plane's clock."""
    sbx = await AsyncSandbox.create(timeout=30, **server.opts())
    await server.advance(29)
    assert await _state(server, sbx.sandbox_id) == "running"
    await server.advance(2)
    assert await _state(server, sbx.sandbox_id) == "gone"


async def test_idle_pause_waits_for_streams_and_cpu_then_traffic_resumes(
        server: InProcessServer) -> None:
    """An idle policy of 60 s: no pause while a command's output streams, nor while the
    CPU is busy; a pause once neither holds for 60 s; the next request resumes it."""
    sandbox_id = await _create(server, timeout=3600, idle={"after": 60},
                               autoResume={"enabled": True})
    sbx = await AsyncSandbox.connect(sandbox_id, **server.opts())
    try:
        await server.advance(59)
        assert await _state(server, sandbox_id) == "running"
        # A command streaming its output: a gateway request in flight.
        streaming = await sbx.commands.run("read line; echo got $line", background=True,
                                           stdin=True, timeout=0)
        await server.advance(600)
        assert await _state(server, sandbox_id) == "running"
        await sbx.commands.send_stdin(streaming.pid, "x\n")
        assert (await streaming.wait()).stdout == "got x\n"
        # A busy CPU, nothing streaming (the loop runs on after its command returned).
        started = await sbx.commands.run(
            "setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $!")
        await server.advance(61)
        assert await _state(server, sandbox_id) == "running"
        await sbx.commands.run(f"kill {started.stdout.strip()}")
        await server.advance(61)
        assert await _state(server, sandbox_id) == "paused"
        # Traffic resumes it (autoResume).
        assert (await sbx.commands.run("echo back")).stdout == "back\n"
        assert await _state(server, sandbox_id) == "running"
    finally:
        await sbx.kill()


async def test_bac_exec_leaves_the_end_where_it_was(server: InProcessServer) -> None:
    """`bac exec` on a `--timeout 30` sandbox does not push its end (it pushed it to now +
    300 s: the CLI connected, and a connect without a timeout grants the default)."""
    made = await _cli(server, "sandbox", "create", "--timeout", "30")
    sandbox_id = made.strip().split()[-1]
    before = (await AsyncSandbox.get_info(sandbox_id, **server.opts())).end_at
    assert (await _cli(server, "exec", sandbox_id, "--", "echo", "hi")).strip() == "hi"
    after = (await AsyncSandbox.get_info(sandbox_id, **server.opts())).end_at
    assert after == before
    assert (after - server.clock.now()).total_seconds() <= 30
    await AsyncSandbox.kill(sandbox_id, **server.opts())


async def _cli(server: InProcessServer, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "BAC_"))}
    env.update(BAC_API_URL=server.url, BAC_API_KEY=server.keys[0])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from bac.cli import main; main()", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_bac_cli_sets_an_idle_policy_at_create(server: InProcessServer) -> None:
    """`bac sandbox create --timeout 0 --idle-after 60` (Bac's SDK's lifecycle idle_after):
    no end, paused after 60 idle seconds, resumed by the next command."""
    made = await _cli(server, "sandbox", "create", "--timeout", "0", "--idle-after", "60")
    sandbox_id = made.strip().split()[-1]
    try:
        info = await AsyncSandbox.get_info(sandbox_id, **server.opts())
        assert info.end_at.year == 9999
        await server.advance(59)
        assert await _state(server, sandbox_id) == "running"  # an API call: activity
        await server.advance(59)
        assert await _state(server, sandbox_id) == "running"
        await server.advance(61)
        assert await _state(server, sandbox_id) == "paused"
        assert (await _cli(server, "exec", sandbox_id, "--", "echo", "up")).strip() == "up"
        assert await _state(server, sandbox_id) == "running"
    finally:
        await AsyncSandbox.kill(sandbox_id, **server.opts())


async def test_scheduled_checkpoints_are_not_activity(server: InProcessServer) -> None:
    """A checkpoint the server takes on its schedule (on the clock too) does not keep the
    sandbox from its idle pause: only what a user does is activity."""
    sandbox_id = await _create(server, timeout=0, idle={"after": 100})
    checkpoints = server.data_dir / "checkpoints"
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                     headers={"X-API-KEY": server.keys[0]}) as api:
            put = await api.put(f"/sandboxes/{sandbox_id}/checkpoints/schedule",
                                json={"intervalSeconds": 60, "keep": 1})
        assert put.status_code == 204, put.text
        taken = set(checkpoints.iterdir()) if checkpoints.is_dir() else set()
        await server.advance(60)  # the schedule's first checkpoint
        async with asyncio.timeout(60):
            # The checkpoint is taken in the schedule's task: wait for its directory.
            while not (checkpoints.is_dir() and set(checkpoints.iterdir()) - taken):  # noqa: ASYNC110 - a file to wait on, no event crosses into the test
                await asyncio.sleep(0.05)
        await server.advance(41)  # 101 s after the create: idle for 100 s
        assert await _state(server, sandbox_id) == "paused"
    finally:
        await AsyncSandbox.kill(sandbox_id, **server.opts())
