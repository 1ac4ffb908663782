"""Checkpoints through Bac's own SDK and CLI against a real server: the timeline, restore,
delete, the disk quota, bad input, and responses conforming to spec/openapi.yaml."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from bac_process import ServerProcess, running
from click.testing import CliRunner
from openapi_check import check

from bac import NotEnoughSpaceError, NotFoundError, Sandbox, SandboxNotFoundError
from bac.cli import cli

pytestmark = pytest.mark.root

# Written by rename, so a reader never sees the file truncated but not yet rewritten.
_COUNTER = ("i=0; while true; do i=$((i+1)); echo $i > /home/user/.now; "
            "mv /home/user/.now /home/user/now; sleep 0.02; done")


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerProcess]:
    with running("checkpoints") as server:
        server.create_key("ckpt")
        yield server


def _opts(server: ServerProcess) -> dict[str, str]:
    return {"api_key": server.keys[0], "api_url": server.url, "sandbox_url": server.url}


def _now(sbx: Sandbox) -> int:
    return int(sbx.commands.run("cat /home/user/now").stdout)


def test_restore_to_checkpoint_3_of_5_rolls_files_and_memory_back(srv: ServerProcess) -> None:
    """Five checkpoints, each after a new file; restoring the third brings back exactly
    the first three files and the counter's value of that moment (memory), which then
    counts on; the timeline lists all five, oldest first, each with its disk use."""
    with Sandbox.create(timeout=300, **_opts(srv)) as sbx:
        sbx.commands.run(_COUNTER, background=True)
        taken, values = [], []
        for n in range(5):
            sbx.files.write(f"/home/user/step-{n}.txt", str(n))
            sbx.commands.run("sleep 0.1")
            taken.append(sbx.checkpoint(name=f"step-{n}"))
            values.append(_now(sbx))
        timeline = sbx.checkpoints()
        assert [c.checkpoint_id for c in timeline] == [c.checkpoint_id for c in taken]
        assert all(c.size_bytes > 1_000_000 and c.memory for c in timeline)
        sbx.restore(taken[2])
        files = sorted(sbx.commands.run("ls /home/user").stdout.split())
        assert [f for f in files if f.startswith("step-")] == [f"step-{n}.txt" for n in range(3)]
        rolled = _now(sbx)
        assert values[1] < rolled <= values[2] + 25, (values, rolled)
        sbx.commands.run("sleep 0.2")
        assert _now(sbx) > rolled
        assert sbx.delete_checkpoint(taken[4]) is True
        assert sbx.delete_checkpoint(taken[4]) is False
        assert len(sbx.checkpoints()) == 4


def test_unknown_and_malformed_checkpoints_are_404(srv: ServerProcess) -> None:
    """Restoring an unknown checkpoint, or one of another sandbox, is 404; checkpointing a
    missing sandbox is 404; the sandbox keeps running."""
    api = httpx.Client(base_url=srv.url, headers={"X-API-KEY": srv.keys[0]}, timeout=60)
    with Sandbox.create(timeout=120, **_opts(srv)) as sbx, \
            Sandbox.create(timeout=120, **_opts(srv)) as other:
        theirs = other.checkpoint()
        for ref in ("cdeadbeefdeadbeef", theirs.checkpoint_id, "..%2f..%2fx"):
            with pytest.raises(NotFoundError):
                sbx.restore(ref)
        with pytest.raises(SandboxNotFoundError):
            Sandbox.pause("nosuchsandbox", **_opts(srv))
        missing = api.post("/sandboxes/nosuchsandbox/checkpoints", json={})
        check("POST", "/sandboxes/{sandboxID}/checkpoints", missing)
        assert missing.status_code == 404
        bad = api.post(f"/sandboxes/{sbx.sandbox_id}/checkpoints", json={"memory": "yes"})
        check("POST", "/sandboxes/{sandboxID}/checkpoints", bad)
        assert bad.status_code == 400 and "memory" in bad.json()["message"]
        fork = api.post(f"/sandboxes/{sbx.sandbox_id}/fork", json={"count": 21})
        check("POST", "/sandboxes/{sandboxID}/fork", fork)
        assert fork.status_code == 400
        assert sbx.commands.run("echo alive").stdout == "alive\n"
    api.close()


def test_responses_conform_to_the_spec(srv: ServerProcess) -> None:
    """Every new route answers what spec/openapi.yaml says."""
    api = httpx.Client(base_url=srv.url, headers={"X-API-KEY": srv.keys[0]}, timeout=60)
    with Sandbox.create(timeout=120, **_opts(srv)) as sbx:
        sid = sbx.sandbox_id
        taken = api.post(f"/sandboxes/{sid}/checkpoints", json={"name": "one"})
        check("POST", "/sandboxes/{sandboxID}/checkpoints", taken)
        cid = taken.json()["checkpointID"]
        check("GET", "/sandboxes/{sandboxID}/checkpoints", api.get(f"/sandboxes/{sid}/checkpoints"))
        check("PUT", "/sandboxes/{sandboxID}/checkpoints/schedule",
              api.put(f"/sandboxes/{sid}/checkpoints/schedule", json={"intervalSeconds": None}))
        check("POST", "/sandboxes/{sandboxID}/checkpoints/{checkpoint_id}/restore",
              api.post(f"/sandboxes/{sid}/checkpoints/{cid}/restore"))
        check("DELETE", "/sandboxes/{sandboxID}/checkpoints/{checkpoint_id}",
              api.delete(f"/sandboxes/{sid}/checkpoints/{cid}"))
        snap = api.post(f"/sandboxes/{sid}/snapshots", json={"name": "spec-snap"})
        check("POST", "/sandboxes/{sandboxID}/snapshots", snap)
        check("GET", "/snapshots", api.get("/snapshots", params={"limit": 1}))
        check("DELETE", "/templates/{templateID}", api.delete("/templates/spec-snap"))
        check("DELETE", "/templates/{templateID}", api.delete("/templates/spec-snap"))
        forked = api.post(f"/sandboxes/{sid}/fork", json={"count": 1, "timeout": 30})
        check("POST", "/sandboxes/{sandboxID}/fork", forked)
        for item in forked.json():
            api.delete(f"/sandboxes/{item['sandbox']['sandboxID']}")
    api.close()


def test_cli_verbs(srv: ServerProcess) -> None:
    """bac sandbox pause/resume/checkpoint/checkpoints/restore/snapshot/fork work end to end
    (exit 0, ids on stdout, JSON where asked)."""
    env = {"BAC_API_URL": srv.url, "BAC_API_KEY": srv.keys[0]}
    runner = CliRunner()

    def bac(*args: str) -> str:
        result = runner.invoke(cli, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout.strip()

    sid = bac("sandbox", "create", "--timeout", "120")
    try:
        assert "paused" in bac("sandbox", "pause", sid)
        assert "resumed" in bac("sandbox", "resume", sid)
        cid = bac("sandbox", "checkpoint", sid, "--name", "cli")
        listed = json.loads(bac("sandbox", "checkpoints", sid, "--json"))
        assert [c["checkpointId"] for c in listed] == [cid]
        assert cid in bac("sandbox", "restore", sid, cid)
        snap = bac("sandbox", "snapshot", sid)
        forks = json.loads(bac("sandbox", "fork", sid, "--count", "1", "--json"))
        assert len(forks) == 1 and isinstance(forks[0], str)
        bac("sandbox", "kill", forks[0])
        assert Sandbox.delete_snapshot(snap, **_opts(srv)) is True
    finally:
        runner.invoke(cli, ["sandbox", "kill", sid], env=env)


def test_disk_quota_refuses_checkpoints_and_keeps_the_sandbox() -> None:
    """Over the team's checkpoint quota a checkpoint fails with a clear 507 (SDK:
    NotEnoughSpaceError), nothing is kept, and the sandbox keeps running."""
    with running("quota", BAC_CHECKPOINT_QUOTA_MB="1") as server:
        server.create_key("quota")
        with Sandbox.create(timeout=120, **_opts(server)) as sbx:
            with pytest.raises(NotEnoughSpaceError, match="quota"):
                sbx.checkpoint()
            assert sbx.checkpoints() == []
            assert sbx.commands.run("echo still").stdout == "still\n"
