"""A server on PostgreSQL (``BAC_DATABASE_URL=postgresql+asyncpg://…``) end to end with the
official e2b SDK: create, commands, files, pause and resume, a SIGKILL and a restart that
re-attaches the running sandbox and resumes the paused one, kill; every row in
PostgreSQL and no SQLite file made. A database restart costs the server nothing, calls
while it is down are 503s; a URL it cannot use stops ``bac serve`` in one line."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir
from e2b import Sandbox, SandboxState
from postgres_cluster import Cluster, missing_reason, running_cluster

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with running_cluster() as cluster:
        yield cluster


@pytest.fixture
def server(postgres: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    url = postgres.new_database("server")
    srv = ServerProcess(fresh_data_dir("postgres"), extra_env={"BAC_DATABASE_URL": url})
    srv.start()
    # bac keys, as the operator runs it, reads the same variable.
    monkeypatch.setenv("BAC_DATABASE_URL", url)
    srv.create_key("pg")
    try:
        yield srv
    finally:
        with contextlib.suppress(httpx.TransportError):  # a failed test may leave it down
            srv.kill_all_sandboxes()
        srv.stop()
    remove_data_dir(srv)


def _rows(postgres: Cluster, server: ServerProcess, sql: str) -> list[str]:
    database = server.extra_env["BAC_DATABASE_URL"].split("?")[0].rsplit("/", 1)[1]
    return postgres.psql(sql, database).split()


def test_the_sdk_drives_a_server_on_postgresql_across_a_restart(
        postgres: Cluster, server: ServerProcess) -> None:
    opts = {"api_key": server.keys[0], "api_url": server.url, "sandbox_url": server.url}
    running = Sandbox.create(timeout=300, metadata={"run": "pg"}, **opts)
    paused = Sandbox.create(timeout=300, **opts)
    assert running.commands.run("echo hello from pg").stdout == "hello from pg\n"
    running.files.write("/home/user/kept.txt", "kept")
    survivor = running.commands.run("sleep 300", background=True)
    paused.files.write("/home/user/paused.txt", "still here")
    assert paused.pause() is True
    assert paused.get_info().state == SandboxState.PAUSED
    paused.connect()  # resume
    assert paused.get_info().state == SandboxState.RUNNING
    assert paused.pause() is True  # and paused again across the restart

    server.kill9()
    server.start()

    listed = {s.sandbox_id: s.state for s in Sandbox.list(**opts).next_items()}
    assert listed == {running.sandbox_id: SandboxState.RUNNING,
                      paused.sandbox_id: SandboxState.PAUSED}
    again = Sandbox.connect(running.sandbox_id, **opts)
    assert again.files.read("/home/user/kept.txt") == "kept"
    assert survivor.pid in {p.pid for p in again.commands.list()}
    woken = Sandbox.connect(paused.sandbox_id, **opts)
    assert woken.files.read("/home/user/paused.txt") == "still here"
    assert woken.commands.run("echo resumed").stdout == "resumed\n"
    for sandbox_id in listed:
        assert Sandbox.kill(sandbox_id, **opts)

    states = _rows(postgres, server, "SELECT state FROM sandboxes ORDER BY sandbox_id")
    assert states == ["killed", "killed"]
    kinds = set(_rows(postgres, server, "SELECT DISTINCT kind FROM sandbox_events"))
    assert {"created", "paused", "resumed", "killed"} <= kinds
    assert not (server.data_dir / "bac.db").exists()
    # Nothing failed on the way (a background writer refused by PostgreSQL logs a trace).
    assert "Traceback" not in server.log.read_text(errors="replace"), server.log_tail(200)


def test_a_database_restart_costs_the_server_nothing(
        postgres: Cluster, server: ServerProcess) -> None:
    """PostgreSQL restarted under a running server (every pooled connection dropped): the
    next calls succeed, the server replaces its connections before use."""
    opts = {"api_key": server.keys[0], "api_url": server.url, "sandbox_url": server.url}
    before = Sandbox.create(timeout=120, **opts)
    postgres.restart()
    assert {s.sandbox_id for s in Sandbox.list(**opts).next_items()} == {before.sandbox_id}
    after = Sandbox.create(timeout=120, **opts)
    assert after.commands.run("echo ok").stdout == "ok\n"
    for sandbox in (before, after):
        assert Sandbox.kill(sandbox.sandbox_id, **opts)


def test_while_the_database_is_down_calls_are_503s_worth_a_retry(
        postgres: Cluster, server: ServerProcess) -> None:
    """With PostgreSQL down an API call is a 503 the SDKs retry (not a 500), naming no
    address of the database; once it is back the same call succeeds."""
    headers = {"X-API-KEY": server.keys[0]}
    postgres.down()
    try:
        down = httpx.get(f"{server.url}/v2/sandboxes", headers=headers, timeout=60)
    finally:
        postgres.up()
    assert down.status_code == 503 and down.headers["Should-Retry"] == "true"
    assert down.json() == {"code": 503,
                           "message": "the server's database is unavailable; try again later"}
    back = httpx.get(f"{server.url}/v2/sandboxes", headers=headers, timeout=60)
    assert back.status_code == 200 and back.json() == []


@pytest.mark.parametrize("url, says", [
    ("postgresql+asyncpg://bac:secret@127.0.0.1:1/bac",
     "bac serve: refusing to start: cannot use the database "
     "postgresql+asyncpg://bac:***@127.0.0.1:1/bac: "),
    ("postgresql://bac@127.0.0.1/bac",
     "bac serve: refusing to start: the database URL postgresql://bac@127.0.0.1/bac names "
     "the driver 'postgresql': use postgresql+asyncpg://"),
])
def test_a_database_it_cannot_use_stops_the_server_in_one_line(url: str, says: str) -> None:
    data_dir = fresh_data_dir("postgres-refused")
    try:
        server = ServerProcess(data_dir, extra_env={"BAC_DATABASE_URL": url,
                                                    "BAC_PREPARE_HOST": "false"})
        done = subprocess.run(
            [sys.executable, "-c", "from bac_server.admin import serve; serve()"],
            env=server.env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        remove_data_dir(ServerProcess(data_dir))
    # The last line says why (the log lines before it are the data dir's set-up).
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith(says), done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "secret" not in done.stderr
