"""Start snapshots on a real server: a template with a start command is kept as a checkpoint
of its started service, and sandboxes created from it are restored from that checkpoint
(real CRIU restores, the official e2b SDK as the client)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bac_process import ServerProcess, running

from bac_server.control.templates import SnapshotRecords, StartSnapshot

pytestmark = [pytest.mark.root, pytest.mark.slow]

PORT = 8123
READY_BOUND_S = 6
# Counts GET /count since its start; /state answers without counting (the ready check).
COUNTER = f"""
import http.server, json, os, secrets, time
STARTED = time.time()
DRAWN = secrets.token_hex(8)
count = 0
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global count
        if self.path == "/count":
            count += 1
        body = json.dumps({{"count": count, "pid": os.getpid(), "started": STARTED,
                           "drawn": DRAWN, "env": os.environ.get("SNAP_ENV")}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", {PORT}), Handler).serve_forever()
"""
READY = f"curl -sf http://127.0.0.1:{PORT}/state"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with running("start-snapshot", BAC_START_SNAPSHOT_READY_S=str(READY_BOUND_S)) as srv:
        srv.create_key("snap")
        yield srv


@pytest.fixture(scope="module", autouse=True)
def e2b_env(server: ServerProcess) -> Iterator[None]:
    """The official SDK pointed at the server through the environment only."""
    names = ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update(E2B_API_URL=server.url, E2B_SANDBOX_URL=server.url,
                      E2B_API_KEY=server.keys[0])
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _counter_template(ready_cmd: str = READY) -> Any:
    from e2b import Template

    script = base64.b64encode(COUNTER.encode()).decode()
    return (Template().from_template("base").set_user("root")
            .run_cmd(f"mkdir -p /srv && echo {script} | base64 -d > /srv/counter.py")
            .set_user("user")
            .set_start_cmd("python3 /srv/counter.py", ready_cmd))


def _build(template: Any, name: str) -> tuple[Any, list[str]]:
    from e2b import LogEntry, Template

    logs: list[LogEntry] = []
    info = Template.build(template, name, on_build_logs=logs.append)
    return info, [f"{e.level} {e.message}" for e in logs]


def _service(server: ServerProcess, sandbox_id: str, path: str) -> dict[str, Any]:
    """The template's service in the sandbox, reached through the gateway."""
    response = httpx.get(server.url + path, timeout=30,
                         headers={"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": str(PORT)})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _snapshot_records(server: ServerProcess) -> list[dict[str, Any]]:
    root = server.data_dir / "start-snapshots"
    return [json.loads(p.read_text()) for p in sorted(root.glob("*.json"))]


@pytest.fixture(scope="module")
def counter(server: ServerProcess) -> Iterator[tuple[Any, list[str]]]:
    """A built template whose start command is the counter, with its start snapshot."""
    yield _build(_counter_template(), f"snap-{uuid.uuid4().hex[:8]}")


def test_build_takes_a_start_snapshot_and_reports_its_size(
        server: ServerProcess, counter: tuple[Any, list[str]]) -> None:
    """The build log says the snapshot was taken and how much disk it uses; its record
    names a checkpoint that exists on disk."""
    info, logs = counter
    assert any("info taking start snapshot" in m for m in logs), logs
    taken = [m for m in logs if "start snapshot taken in" in m]
    assert taken and "MiB on disk" in taken[0], logs
    [record] = [r for r in _snapshot_records(server) if r["template_id"] == info.template_id]
    assert record["complete"] and record["size_bytes"] > 0
    assert (server.data_dir / "checkpoints" / record["checkpoint_id"] / "meta.json").is_file()


def test_sandboxes_are_restored_from_the_snapshot_and_diverge(
        server: ServerProcess, counter: tuple[Any, list[str]]) -> None:
    """Two sandboxes continue the service from the snapshot: it started before they were
    created (a restore, not a boot), both hold the value it drew at start, and their
    counters start at the snapshot's and move independently; files, env vars given at
    create and tokens work as in any sandbox."""
    from e2b import Sandbox

    info, _logs = counter
    asked = time.time()
    first = Sandbox.create(info.name, envs={"SNAP_ENV": "one"}, timeout=120)
    second = Sandbox.create(info.name, envs={"SNAP_ENV": "two"}, timeout=120)
    try:
        a = [_service(server, first.sandbox_id, "/count") for _ in range(3)]
        b = _service(server, second.sandbox_id, "/count")
        assert [s["count"] for s in a] == [1, 2, 3] and b["count"] == 1
        assert a[0]["started"] < asked and b["started"] < asked, (a[0], b, asked)
        assert a[0]["drawn"] == b["drawn"] and a[0]["pid"] == b["pid"]
        # The service keeps the environment it was started with (the template's).
        assert a[0]["env"] is None and b["env"] is None
        run = first.commands.run("echo $SNAP_ENV; test -f /srv/counter.py && echo file")
        assert run.stdout.split() == ["one", "file"]
        assert second.commands.run("echo $SNAP_ENV").stdout.strip() == "two"
        assert first.commands.run("whoami").stdout.strip() == "user"
    finally:
        first.kill()
        second.kill()


def test_the_snapshot_token_does_not_open_a_restored_sandbox(
        server: ServerProcess, counter: tuple[Any, list[str]]) -> None:
    """A restored sandbox's envd answers its own token only: the token in force when the
    snapshot was taken is refused."""
    from e2b import Sandbox

    info, _logs = counter
    [record] = [r for r in _snapshot_records(server) if r["template_id"] == info.template_id]
    sbx = Sandbox.create(info.name, timeout=120)
    try:
        url = server.url + "/files?path=/etc/hostname"
        routing = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "49983"}
        own = sbx._envd_access_token  # what the API gave the SDK
        assert own and own != record["token"]
        refused = httpx.get(url, headers={**routing, "X-Access-Token": record["token"]})
        assert refused.status_code == 401, refused.text
        allowed = httpx.get(url, headers={**routing, "X-Access-Token": own})
        assert allowed.status_code == 200 and allowed.text.strip() == sbx.sandbox_id
    finally:
        sbx.kill()


def test_an_unchanged_rebuild_reuses_the_snapshot(
        server: ServerProcess, counter: tuple[Any, list[str]]) -> None:
    """Building the same template again takes no new snapshot: the record and its
    checkpoint stay the same, and the log says it was reused."""
    info, _logs = counter
    before = _snapshot_records(server)
    again, logs = _build(_counter_template(), info.name)
    assert again.template_id == info.template_id
    assert any("start snapshot reused" in m for m in logs), logs
    assert not any("taking start snapshot" in m for m in logs), logs
    assert _snapshot_records(server) == before


def test_a_service_never_ready_gives_a_template_that_boots(server: ServerProcess) -> None:
    """When the ready command never succeeds within the bound, the build still ends ready,
    its log warns why there is no snapshot, and its sandboxes boot and work."""
    from e2b import Sandbox

    info, logs = _build(_counter_template(ready_cmd="false"), f"snap-{uuid.uuid4().hex[:8]}")
    warned = [m for m in logs if m.startswith("warn start snapshot not taken")]
    assert warned and "did not succeed within" in warned[0], logs
    assert not [r for r in _snapshot_records(server) if r["template_id"] == info.template_id]
    asked = time.time()
    sbx = Sandbox.create(info.name, timeout=120)
    try:
        state = _service(server, sbx.sandbox_id, "/count")
        assert state["started"] > asked and state["count"] == 1  # booted: started anew
        assert sbx.commands.run("echo ok").stdout == "ok\n"
    finally:
        sbx.kill()


def test_deleting_the_template_deletes_its_snapshot(server: ServerProcess) -> None:
    """The snapshot's record and checkpoint go when its template is deleted."""
    name = f"snap-{uuid.uuid4().hex[:8]}"
    info, _logs = _build(_counter_template(), name)
    [record] = [r for r in _snapshot_records(server) if r["template_id"] == info.template_id]
    checkpoint = server.data_dir / "checkpoints" / record["checkpoint_id"]
    assert checkpoint.is_dir()
    _delete(server, info.template_id)
    assert not [r for r in _snapshot_records(server) if r["template_id"] == info.template_id]
    assert not checkpoint.exists()


def _delete(server: ServerProcess, template_id: str) -> None:
    response = httpx.delete(f"{server.url}/templates/{template_id}",
                            headers={"X-API-KEY": server.keys[0]})
    assert response.status_code == 204, response.text


def _init_started(server: ServerProcess, sandbox_id: str) -> float:
    """When the kernel made the sandbox's first process (envd's keeper, its pid 1): a
    restore makes it anew. Read on the host (inside, LXCFS shows the sandbox's own
    uptime, which the process's start ticks are not counted from)."""
    state = server.data_dir / "sandboxes" / _slot_of(server, sandbox_id) / "state.json"
    pid = json.loads(state.read_text())["init_pid"]
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    up = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - up + ticks / os.sysconf("SC_CLK_TCK")


def test_a_create_takes_a_sandbox_restored_ahead(
        server: ServerProcess, counter: tuple[Any, list[str]]) -> None:
    """Once a template is in use the server keeps one sandbox restored ahead: the next
    create of the same shape gets it (its processes existed before the request), with its
    own id as hostname, token and env vars and fresh-from-snapshot service state; the
    pool refills."""
    from e2b import Sandbox

    info, _logs = counter
    Sandbox.create(info.name, timeout=120).kill()  # the template is in use
    # One or more: the pool grows with the template's creates (BAC_POOL_MAX).
    ahead = set(_wait_for_pooled(server, info.template_id, exclude=set()))
    asked = time.time()
    pooled = Sandbox.create(info.name, envs={"SNAP_ENV": "pooled"}, timeout=120)
    try:
        assert _slot_of(server, pooled.sandbox_id) in ahead
        assert _init_started(server, pooled.sandbox_id) < asked
        assert pooled.commands.run("echo $SNAP_ENV; hostname").stdout.split() == \
            ["pooled", pooled.sandbox_id]
        assert _service(server, pooled.sandbox_id, "/count")["count"] == 1
        _wait_for_pooled(server, info.template_id, exclude=ahead)  # refilled
    finally:
        pooled.kill()


def _slot_of(server: ServerProcess, sandbox_id: str) -> str:
    return (server.data_dir / "claims" / sandbox_id).read_text().strip()


def _pooled(server: ServerProcess, template_id: str) -> set[str]:
    """Slots the backend holds ready for the template that no create handed out yet."""
    found = set()
    for state in (server.data_dir / "sandboxes").glob("*/state.json"):
        record = json.loads(state.read_text())
        if record.get("template_id") == template_id and record.get("phase") == "pooled":
            found.add(state.parent.name)
    return found


def _wait_for_pooled(server: ServerProcess, template_id: str, *,
                     exclude: set[str]) -> list[str]:
    # The pool fills in the background and announces nothing: poll with a deadline.
    deadline = time.monotonic() + 90
    while not (found := _pooled(server, template_id) - exclude):
        assert time.monotonic() < deadline, "no sandbox was restored ahead"
        time.sleep(0.1)
    return sorted(found)


def test_a_broken_snapshot_boots_and_is_dropped(server: ServerProcess) -> None:
    """A snapshot whose images were deleted cannot be restored: the create boots a working
    sandbox instead, and the snapshot's record and checkpoint are dropped."""
    from e2b import Sandbox

    info, _logs = _build(_counter_template(), f"snap-{uuid.uuid4().hex[:8]}")
    [record] = [r for r in _snapshot_records(server) if r["template_id"] == info.template_id]
    checkpoint = server.data_dir / "checkpoints" / record["checkpoint_id"]
    shutil.rmtree(checkpoint / "images")
    asked = time.time()
    sbx = Sandbox.create(info.name, timeout=120)
    try:
        state = _service(server, sbx.sandbox_id, "/count")
        assert state["started"] > asked and state["count"] == 1  # booted: started anew
        assert not [r for r in _snapshot_records(server)
                    if r["template_id"] == info.template_id]
        assert not checkpoint.exists()
    finally:
        sbx.kill()


def test_snapshots_survive_a_crashed_server(
        server: ServerProcess, counter: tuple[Any, list[str]]) -> None:
    """After a SIGKILL and a restart the sandboxes it had restored ahead are cleaned up
    and the template's sandboxes are still restored from its snapshot."""
    from e2b import Sandbox

    info, _logs = counter
    Sandbox.create(info.name, timeout=120).kill()
    ahead = _wait_for_pooled(server, info.template_id, exclude=set())
    server.kill9()
    server.start()
    for slot in ahead:
        assert not (server.data_dir / "sandboxes" / slot).exists()  # torn down, orphans
    asked = time.time()
    sbx = Sandbox.create(info.name, timeout=120)
    try:
        state = _service(server, sbx.sandbox_id, "/count")
        assert state["started"] < asked and state["count"] == 1
    finally:
        sbx.kill()


def test_a_half_taken_snapshot_is_swept_after_a_restart(
        server: ServerProcess, counter: tuple[Any, list[str]]) -> None:
    """A record a crash left incomplete is dropped at the first use after a restart, with
    the checkpoint it names; the complete one stays and still serves creates."""
    from e2b import Sandbox

    info, _logs = counter
    [kept] = [r for r in _snapshot_records(server) if r["template_id"] == info.template_id]
    half = StartSnapshot(template_id=info.template_id, digest="e" * 32,
                         checkpoint_id=f"c{uuid.uuid4().hex[:12]}", token="t")
    server.kill9()
    SnapshotRecords(server.data_dir / "start-snapshots").write(half)
    partial = server.data_dir / "checkpoints" / half.checkpoint_id
    partial.mkdir(mode=0o700)
    (partial / "meta.json").write_text("{}")
    server.start()
    asked = time.time()
    sbx = Sandbox.create(info.name, timeout=120)
    try:
        assert _service(server, sbx.sandbox_id, "/count")["started"] < asked  # restored
        assert kept in _snapshot_records(server)
        assert [r for r in _snapshot_records(server) if r["digest"] == half.digest] == []
        assert not partial.exists()
    finally:
        sbx.kill()
