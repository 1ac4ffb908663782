"""envd dies and comes back: the sandbox's keeper (its PID 1) restarts it on the same
socket with what ``/init`` set, the sandbox's other processes live on, and the host hears
of each restart on the trace socket. Real sandboxes, real ``kill -9``s."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from backend_harness import Sandbox, SandboxFactory, start_time
from runc_fixtures import runc_fixtures

from bac_server.backends.namespaces import NamespaceBackend, testing

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

runc_pair, runc, make = runc_fixtures("keeper")


def _envd_pid(backend: NamespaceBackend, sandbox_id: str) -> int:
    """The host pid of the sandbox's envd: the keeper's child running bac_envd."""
    keeper = testing.init_pid(backend, sandbox_id)
    for child in Path(f"/proc/{keeper}/task/{keeper}/children").read_text().split():
        if b"bac_envd" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    raise AssertionError("no envd under the keeper")


async def _wait_answering(sbx: Sandbox, within_s: float = 30.0) -> float:
    """Seconds until envd answers /health again (bounded)."""
    started = time.monotonic()
    async with httpx.AsyncClient(trust_env=False) as client:
        while True:
            try:
                if (await client.get(f"{sbx.envd_url}/health", timeout=2)).status_code == 204:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            assert time.monotonic() - started < within_s, "envd never answered again"
            await asyncio.sleep(0.05)  # polling the condition, bounded by within_s


async def test_envd_killed_from_the_host_comes_back_with_its_token_and_env(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    """SIGKILL to envd from the host: a new envd answers on the same address, still
    demands the sandbox's token and serves the env vars /init set; the keeper is the
    same process."""
    sbx = await make_sandbox(envd_access_token="tok-keeper", env_vars={"KEPT": "yes"})
    keeper = testing.init_pid(backend, sbx.id)
    keeper_start = start_time(keeper)
    old = _envd_pid(backend, sbx.id)
    os.kill(old, signal.SIGKILL)
    await _wait_answering(sbx)
    assert _envd_pid(backend, sbx.id) != old
    assert start_time(keeper) == keeper_start
    async with httpx.AsyncClient(trust_env=False) as client:
        refused = await client.get(f"{sbx.envd_url}/envs", timeout=10)
        assert refused.status_code == 401
        envs = await client.get(f"{sbx.envd_url}/envs", timeout=10,
                                headers={"X-Access-Token": "tok-keeper"})
        assert envs.status_code == 200 and envs.json()["KEPT"] == "yes"


async def test_envd_killed_by_root_inside_is_restarted_and_reported(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    """Root inside (sudo) kills envd: the user's background process lives on, envd runs
    commands again, and the host gets an envd_restarted report with the count."""
    reports: list[dict[str, object]] = []
    backend.trace_to(lambda sandbox_id, data: reports.append(
        {"sandbox": sandbox_id, **json.loads(data)}))
    try:
        sbx = await make_sandbox()
        sleeper = await sbx.sdk.commands.run("sleep 600", background=True, user="user")
        for count in (1, 2):
            with pytest.raises(Exception):  # noqa: B017 - envd dies under the call
                await sbx.sdk.commands.run("sudo kill -9 $PPID", user="user",
                                           request_timeout=10)
            await _wait_answering(sbx)
            deadline = time.monotonic() + 10
            while not any(r.get("kind") == "envd_restarted" and r.get("count") == count
                          for r in reports):
                assert time.monotonic() < deadline, reports
                await asyncio.sleep(0.05)
        restarts = [r for r in reports if r.get("kind") == "envd_restarted"]
        assert [r["count"] for r in restarts] == [1, 2]
        assert all(r["sandbox"] == sbx.id and r["signal"] == 9 for r in restarts)
        alive = await sbx.run(f"kill -0 {sleeper.pid} && echo alive", user="user")
        assert alive.stdout.strip() == "alive", alive
    finally:
        backend.trace_to(None)


async def test_a_keeper_restored_from_a_pause_still_restarts_envd(
        runc: NamespaceBackend, make: SandboxFactory) -> None:
    """Paused to disk and resumed (CRIU dumps and restores the tree from the keeper, its
    pipe and its copy of /init included), the sandbox's keeper still restarts a killed
    envd with the token and env vars, and the count goes on from before the pause."""
    reports: list[dict[str, object]] = []
    runc.trace_to(lambda sandbox_id, data: reports.append(json.loads(data)))
    try:
        sbx = await make(envd_access_token="tok-paused", env_vars={"KEPT": "paused"})
        os.kill(_envd_pid(runc, sbx.id), signal.SIGKILL)
        await _wait_answering(sbx)
        await runc.suspend(sbx.id, memory=True)
        sbx = await make.attach(sbx.spec, await runc.wake(sbx.spec, memory=True))
        os.kill(_envd_pid(runc, sbx.id), signal.SIGKILL)
        await _wait_answering(sbx)
        async with httpx.AsyncClient(trust_env=False) as client:
            envs = await client.get(f"{sbx.envd_url}/envs", timeout=10,
                                    headers={"X-Access-Token": "tok-paused"})
            assert envs.status_code == 200 and envs.json()["KEPT"] == "paused"
        deadline = time.monotonic() + 10
        while [r.get("count") for r in reports if r.get("kind") == "envd_restarted"] \
                != [1, 2]:
            assert time.monotonic() < deadline, reports
            await asyncio.sleep(0.05)
    finally:
        runc.trace_to(None)
