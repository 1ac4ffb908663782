"""Pause, resume, auto-pause, auto-resume, snapshots and forks with the official e2b SDK.

The pause/resume cycle test runs 10 cycles by default; set ``BAC_PAUSE_CYCLES=50`` for the
issue's full 50 (about 1 s per cycle on the reference machine).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from bac_process import ServerProcess
from e2b import CommandExitException, PtySize, Sandbox, SandboxState
from e2b.exceptions import SandboxException, SandboxNotFoundException

pytestmark = pytest.mark.root

CYCLES = int(os.environ.get("BAC_PAUSE_CYCLES", "10"))
DEADLINE = 60.0
_COUNTER = "i=0; while true; do i=$((i+1)); echo $i >> /home/user/count; sleep 0.05; done"
_SERVER = "python3 -m http.server 8000 --bind 0.0.0.0 --directory /home/user"


def _wait_for(check, what: str, deadline: float = DEADLINE):  # type: ignore[no-untyped-def]
    # A timer firing inside the server has no event a client can wait on: poll the API.
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            result = check()
        except CommandExitException:
            result = None  # e.g. the server is not listening yet: connection refused
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _count(sbx: Sandbox) -> int:
    return int(sbx.commands.run("tail -n1 /home/user/count").stdout)


def _serving(sbx: Sandbox) -> str:
    return sbx.commands.run(
        "python3 -c 'import urllib.request as u; "
        "print(u.urlopen(\"http://127.0.0.1:8000/marker.txt\").read().decode())'").stdout


def test_pause_resume_cycles_lose_nothing() -> None:
    """Many pause/resume cycles: the counting process keeps counting and is listed, the
    listening server answers, files written between cycles stay, the PTY stays usable."""
    sbx = Sandbox.create(timeout=600)
    try:
        counter = sbx.commands.run(_COUNTER, background=True)
        server = sbx.commands.run(_SERVER, background=True)
        pty = sbx.pty.create(PtySize(rows=24, cols=80), timeout=0)
        sbx.files.write("/home/user/marker.txt", "served")
        _wait_for(lambda: "served" in _serving(sbx), "the server to listen")
        last = _count(sbx)
        for cycle in range(CYCLES):
            sbx.files.write(f"/home/user/cycle-{cycle}.txt", str(cycle))
            assert sbx.pause() is True
            assert sbx.get_info().state == SandboxState.PAUSED
            sbx.connect()
            assert sbx.get_info().state == SandboxState.RUNNING
            pids = {p.pid for p in sbx.commands.list()}
            assert {counter.pid, server.pid, pty.pid} <= pids, f"cycle {cycle}: {pids}"
            last = _wait_for(lambda floor=last: (c := _count(sbx)) > floor and c,
                             "the counter to move")
            assert _serving(sbx) == "served\n"
        listing = sbx.commands.run("ls /home/user").stdout.split()
        assert {f"cycle-{n}.txt" for n in range(CYCLES)} <= set(listing)
        # The stream ends after 20 s at the latest (the connection's timeout).
        attached = sbx.pty.connect(pty.pid, timeout=20)
        sbx.pty.send_stdin(pty.pid, b"echo pty-ok-$((6*7))\n")
        seen = b""
        for _stdout, _stderr, data in attached:
            seen += data or b""
            if b"pty-ok-42" in seen:
                break
        assert b"pty-ok-42" in seen
    finally:
        sbx.kill()


def test_auto_pause_then_resume_by_sdk_call() -> None:
    """With on_timeout=pause the timeout pauses (not kills); the next SDK call to envd
    resumes it (auto_resume) with its processes and files."""
    sbx = Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause", "auto_resume": True})
    try:
        counter = sbx.commands.run(_COUNTER, background=True)
        sbx.files.write("/home/user/kept.txt", "kept")
        assert sbx.get_info().lifecycle == {"auto_resume": True, "on_timeout": "pause"}
        sbx.set_timeout(0)
        _wait_for(lambda: sbx.get_info().state == SandboxState.PAUSED, "the auto-pause")
        assert sbx.files.read("/home/user/kept.txt") == "kept"  # resumes it
        assert sbx.get_info().state == SandboxState.RUNNING
        assert counter.pid in {p.pid for p in sbx.commands.list()}
    finally:
        sbx.kill()


def test_auto_resume_by_gateway_request(server: ServerProcess) -> None:
    """A plain HTTP request to a paused sandbox's port through the gateway resumes it."""
    sbx = Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause", "auto_resume": True})
    try:
        sbx.files.write("/home/user/marker.txt", "through the gateway")
        sbx.commands.run(_SERVER, background=True)
        _wait_for(lambda: "gateway" in _serving(sbx), "the server to listen")
        assert sbx.pause() is True
        response = httpx.get(f"{server.url}/marker.txt", timeout=60,
                             headers={"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "8000"})
        assert response.status_code == 200 and response.text == "through the gateway"
        assert sbx.get_info().state == SandboxState.RUNNING
    finally:
        sbx.kill()


def test_without_auto_resume_paused_stays_paused() -> None:
    """Without auto_resume, calls to a paused sandbox fail and it stays paused."""
    sbx = Sandbox.create(timeout=120)
    try:
        sbx.pause()
        with pytest.raises(SandboxException):
            sbx.commands.run("true")
        assert sbx.get_info().state == SandboxState.PAUSED
    finally:
        sbx.kill()


def test_filesystem_pause_and_reboot() -> None:
    """mode=filesystem keeps files but not processes; on_resume=reboot does the same to a
    full pause."""
    sbx = Sandbox.create(timeout=120)
    try:
        sbx.files.write("/home/user/a.txt", "a")
        first = sbx.commands.run("sleep 600", background=True)
        assert sbx.pause(mode="filesystem") is True
        sbx.connect()
        assert sbx.files.read("/home/user/a.txt") == "a"
        assert first.pid not in {p.pid for p in sbx.commands.list()}
        second = sbx.commands.run("sleep 600", background=True)
        sbx.pause()
        sbx.connect(on_resume="reboot")
        assert sbx.files.read("/home/user/a.txt") == "a"
        assert second.pid not in {p.pid for p in sbx.commands.list()}
    finally:
        sbx.kill()


def test_a_failed_resume_says_why_and_keeps_the_sandbox_paused(
        slot_dir: Callable[[str], Path]) -> None:
    """A paused sandbox whose saved state cannot be restored (an image gone from the
    disk): connect fails with a message saying so and what to do; the sandbox stays paused
    with its files, and on_resume=reboot starts it afresh on them."""
    sbx = Sandbox.create(timeout=120)
    try:
        sbx.files.write("/home/user/kept.txt", "kept")
        assert sbx.pause() is True
        slot = slot_dir(sbx.sandbox_id)
        (slot / "suspend" / "images" / "pstree.img").unlink()
        with pytest.raises(SandboxException) as failed:
            sbx.connect()
        message = str(failed.value)
        assert "could not be restored" in message and "reboot" in message, message
        assert "/" + slot.name not in message  # host paths stay in the server's log
        assert sbx.get_info().state == SandboxState.PAUSED
        sbx.connect(on_resume="reboot")
        assert sbx.files.read("/home/user/kept.txt") == "kept"
    finally:
        sbx.kill()


def test_pause_of_a_missing_sandbox_is_not_found() -> None:
    """pause/connect of an unknown id are SandboxNotFoundException (404)."""
    with pytest.raises(SandboxNotFoundException):
        Sandbox.pause("nosuchsandbox0")
    with pytest.raises(SandboxNotFoundException):
        Sandbox.connect("nosuchsandbox0")


def test_snapshot_starts_new_sandboxes_and_is_deleted() -> None:
    """create_snapshot leaves the source running; Sandbox.create(snapshot_id) starts a new
    sandbox with its files and processes; list and delete work; delete twice is False."""
    sbx = Sandbox.create(timeout=120)
    copy = None
    try:
        sbx.files.write("/home/user/snap.txt", "in the snapshot")
        counter = sbx.commands.run(_COUNTER, background=True)
        snap = sbx.create_snapshot()
        assert sbx.get_info().state == SandboxState.RUNNING
        listed = [s.snapshot_id for s in Sandbox.list_snapshots(sandbox_id=sbx.sandbox_id)
                  .next_items()]
        assert snap.snapshot_id in listed
        copy = Sandbox.create(snap.snapshot_id, timeout=60)
        assert copy.sandbox_id != sbx.sandbox_id
        assert copy.files.read("/home/user/snap.txt") == "in the snapshot"
        assert counter.pid in {p.pid for p in copy.commands.list()}
        assert copy.commands.run("hostname").stdout.strip() == copy.sandbox_id
        assert Sandbox.delete_snapshot(snap.snapshot_id) is True
        assert Sandbox.delete_snapshot(snap.snapshot_id) is False
    finally:
        sbx.kill()
        if copy is not None:
            copy.kill()


def test_fork_three_diverge() -> None:
    """fork(count=3) gives three new sandboxes with the source's state that diverge
    independently; the source keeps running with its id and timeout."""
    sbx = Sandbox.create(timeout=120)
    forks: list[Sandbox] = []
    try:
        sbx.files.write("/home/user/origin.txt", "origin")
        end = sbx.get_info().end_at
        made = sbx.fork(count=3, timeout=60)
        forks = [f for f in made if isinstance(f, Sandbox)]
        assert len(forks) == 3, made
        assert len({f.sandbox_id for f in forks} | {sbx.sandbox_id}) == 4
        for n, f in enumerate(forks):
            assert f.files.read("/home/user/origin.txt") == "origin"
            f.files.write("/home/user/mine.txt", str(n))
        assert [f.files.read("/home/user/mine.txt") for f in forks] == ["0", "1", "2"]
        assert not sbx.files.exists("/home/user/mine.txt")
        assert sbx.get_info().end_at == end
    finally:
        for f in forks:
            f.kill()
        sbx.kill()
