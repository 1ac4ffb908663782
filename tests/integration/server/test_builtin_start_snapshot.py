"""Built-in templates get a start snapshot too: the first create of `base` boots and has
the snapshot taken in the background, the next ones are restored from it (no pool here,
so each is a real restore), and a restored sandbox is its own: id, hostname, env vars,
files. After a restart the old snapshot is dropped at the first create (an upgraded envd
is never restored from an old one) and taken again."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bac_process import ServerProcess, running
from e2b import Sandbox

pytestmark = [pytest.mark.root, pytest.mark.slow]

NO_POOL = {"BAC_POOL_SIZE": "0", "BAC_START_SNAPSHOT_POOL": "0", "BAC_POOL_MAX": "0"}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with running("builtin-snapshot", **NO_POOL) as srv:
        srv.create_key("builtin")
        yield srv


def _opts(server: ServerProcess) -> dict[str, Any]:
    return {"api_key": server.keys[0], "api_url": server.url, "sandbox_url": server.url}


def _records(server: ServerProcess) -> list[dict[str, Any]]:
    return [json.loads(p.read_text())
            for p in (server.data_dir / "start-snapshots").glob("*.json")]


def _snapshot_of_base(server: ServerProcess, bound_s: float = 90) -> dict[str, Any]:
    """The base template's record once it is complete (taken in the background)."""
    deadline = time.monotonic() + bound_s
    while True:
        done = [r for r in _records(server) if r["template_id"] == "base" and r["complete"]]
        if done:
            return done[0]
        assert time.monotonic() < deadline, f"no start snapshot of base: {_records(server)}"
        time.sleep(0.2)


def _how(server: ServerProcess, sandbox_id: str) -> str:
    logs = httpx.get(f"{server.url}/sandboxes/{sandbox_id}/logs",
                     headers={"X-API-Key": server.keys[0]}).json()["logs"]
    started = [json.loads(entry["line"]) for entry in logs
               if '"event":"started"' in entry["line"].replace(" ", "")]
    assert started, logs
    return str(started[0]["how"])


def test_the_first_create_boots_and_the_next_are_restored(server: ServerProcess) -> None:
    with Sandbox.create(timeout=120, **_opts(server)) as first:
        assert _how(server, first.sandbox_id) == "boot"
        first.files.write("/tmp/first-only", "mine")
        record = _snapshot_of_base(server)
        assert Path(server.data_dir / "checkpoints" / record["checkpoint_id"]).is_dir()
        with Sandbox.create(timeout=120, envs={"WHO": "second"}, **_opts(server)) as second:
            assert _how(server, second.sandbox_id) == "start_snapshot"
            seen = second.commands.run("hostname; echo $WHO; ls /tmp/first-only || true")
            assert seen.stdout.split("\n")[:2] == [second.sandbox_id, "second"], seen
            assert "first-only" not in seen.stdout.split("\n")[2]
            assert second.files.read("/etc/hostname").strip() == second.sandbox_id


def test_a_restart_drops_the_snapshot_and_takes_it_again(server: ServerProcess) -> None:
    before = _snapshot_of_base(server)
    server.stop()
    server.start()
    with Sandbox.create(timeout=120, **_opts(server)) as booted:
        # Not restored from the last process's snapshot: dropped at this first use.
        assert _how(server, booted.sandbox_id) == "boot"
        assert all(r["checkpoint_id"] != before["checkpoint_id"] for r in _records(server))
        assert not (server.data_dir / "checkpoints" / before["checkpoint_id"]).exists()
    again = _snapshot_of_base(server)
    assert again["checkpoint_id"] != before["checkpoint_id"]


def test_a_restored_code_interpreter_has_its_kernel_up_and_nothing_run_in_it(
        server: ServerProcess) -> None:
    """The code-interpreter's snapshot is taken once the default Python kernel is up
    (its warm-up waits for it, running nothing in it): a restored sandbox's first cell is
    the kernel's first."""
    from e2b_code_interpreter import Sandbox as CodeSandbox

    with CodeSandbox.create(timeout=120, **_opts(server)) as first:
        assert _how(server, first.sandbox_id) == "boot"
        deadline = time.monotonic() + 90
        while not [r for r in _records(server)
                   if r["template_id"] == "code-interpreter" and r["complete"]]:
            assert time.monotonic() < deadline, _records(server)
            time.sleep(0.2)
    with CodeSandbox.create(timeout=120, **_opts(server)) as restored:
        assert _how(server, restored.sandbox_id) == "start_snapshot"
        first_cell = restored.run_code("x = 1 + 1\nx")
        assert first_cell.text == "2" and first_cell.execution_count == 1, first_cell
        assert restored.run_code("'_' in dir() and Out").text == "{1: 2}"
