"""Paused sandboxes, checkpoints and snapshots survive a server crash: SIGKILL the server
with sandboxes paused (full and files-only) and running, start it again, resume them all."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir
from e2b import Sandbox, SandboxState

from bac import Sandbox as BacSandbox

pytestmark = pytest.mark.root

_COUNTER = "i=0; while true; do i=$((i+1)); echo $i >> /home/user/count; sleep 0.05; done"


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess(fresh_data_dir("restart-paused"))
    srv.start()
    srv.create_key("restart")
    try:
        yield srv
    finally:
        srv.kill_all_sandboxes()
        srv.stop()
    remove_data_dir(srv)


def test_paused_and_running_sandboxes_survive_sigkill(server: ServerProcess) -> None:
    """After kill -9 and a restart: the fully paused sandbox resumes with its process, the
    files-only one with its files, the running one runs; a checkpoint and a snapshot taken
    before the crash still restore and start sandboxes."""
    opts = {"api_key": server.keys[0], "api_url": server.url, "sandbox_url": server.url}
    full = Sandbox.create(timeout=300, **opts)
    counter = full.commands.run(_COUNTER, background=True)
    files_only = Sandbox.create(timeout=300, **opts)
    files_only.files.write("/home/user/kept.txt", "kept")
    running = Sandbox.create(timeout=300, **opts)
    with contextlib.closing(BacSandbox.connect(running.sandbox_id, **opts)) as bac_running:
        checkpoint = bac_running.checkpoint()
    running.files.write("/home/user/after.txt", "after the checkpoint")
    snapshot = running.create_snapshot()
    full.pause()
    files_only.pause(mode="filesystem")

    server.kill9()
    server.start()

    states = {s.sandbox_id: s.state for s in Sandbox.list(**opts).next_items()}
    assert states == {full.sandbox_id: SandboxState.PAUSED,
                      files_only.sandbox_id: SandboxState.PAUSED,
                      running.sandbox_id: SandboxState.RUNNING}
    resumed = Sandbox.connect(full.sandbox_id, **opts)
    assert counter.pid in {p.pid for p in resumed.commands.list()}
    assert Sandbox.connect(files_only.sandbox_id, **opts).files.read(
        "/home/user/kept.txt") == "kept"
    with contextlib.closing(BacSandbox.connect(running.sandbox_id, **opts)) as again:
        assert [c.checkpoint_id for c in again.checkpoints()] == [checkpoint.checkpoint_id]
        again.restore(checkpoint)
        assert not again.files.exists("/home/user/after.txt")
    copy = Sandbox.create(snapshot.snapshot_id, timeout=60, **opts)
    assert copy.files.read("/home/user/after.txt") == "after the checkpoint"
    for sbx in (full, files_only, running, copy):
        Sandbox.kill(sbx.sandbox_id, **opts)
    assert Sandbox.delete_snapshot(snapshot.snapshot_id, **opts)
