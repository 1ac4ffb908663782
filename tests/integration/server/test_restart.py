"""Restart safety: SIGKILL the server with sandboxes running and a command in flight, start it
again on the same data dir, and check what survived, what was cleaned, and that nothing leaked."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir
from e2b import Sandbox
from e2b.exceptions import SandboxException

pytestmark = pytest.mark.root


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess(fresh_data_dir("restart"))
    srv.start()
    srv.create_key("restart")
    try:
        yield srv
    finally:
        with contextlib.suppress(httpx.TransportError):  # a failed test may leave it down
            srv.kill_all_sandboxes()
        srv.stop()
    remove_data_dir(srv)


def _opts(server: ServerProcess) -> dict[str, str]:
    return {"api_key": server.keys[0], "api_url": server.url, "sandbox_url": server.url}


def _slot_of(server: ServerProcess, sandbox_id: str) -> str:
    for slot in server.slots():
        try:
            record = (server.data_dir / "sandboxes" / slot / "state.json").read_text()
        except FileNotFoundError:
            continue  # a warm pool slot being laid out: its record comes right after
        if f'"sandbox_id": "{sandbox_id}"' in record:
            return slot
    raise AssertionError(f"no slot holds {sandbox_id}")


def _runtime_containers() -> set[str]:
    root = "/run/bac/runtime"
    return set(os.listdir(root)) if os.path.isdir(root) else set()


def test_sigkill_restart_reattaches_running_sandboxes(server: ServerProcess) -> None:
    """After kill -9 and a restart, running sandboxes are listed and usable, their processes
    (including one started before the crash) still run, and kill then releases everything."""
    opts = _opts(server)
    first = Sandbox.create(timeout=120, metadata={"n": "1"}, **opts)
    second = Sandbox.create(timeout=120, metadata={"n": "2"}, **opts)
    first.files.write("/home/user/before.txt", "kept")
    survivor = first.commands.run("sleep 300", background=True)
    in_flight = second.commands.run("echo started; sleep 300", background=True)
    end_before = first.get_info().end_at

    server.kill9()
    with pytest.raises(SandboxException):
        in_flight.wait()  # the stream through the dead server breaks; the SDK says so
    server.start()

    listed = {s.sandbox_id for s in Sandbox.list(**opts).next_items()}
    assert listed == {first.sandbox_id, second.sandbox_id}
    again = Sandbox.connect(first.sandbox_id, **opts)
    assert again.files.read("/home/user/before.txt") == "kept"
    assert again.commands.run("echo alive").stdout == "alive\n"
    assert survivor.pid in {p.pid for p in again.commands.list()}
    assert again.get_info().end_at >= end_before  # the timer was re-armed, not reset short
    assert Sandbox.connect(second.sandbox_id, **opts).commands.run("true").exit_code == 0
    for sandbox_id in listed:
        assert Sandbox.kill(sandbox_id, **opts)
    assert not {_slot for _slot in server.slots() if _slot in _runtime_containers()} - set(
        server.slots()
    )


def test_sandbox_that_died_while_down_is_cleaned(server: ServerProcess) -> None:
    """A sandbox whose processes die while the server is down is marked died and released."""
    opts = _opts(server)
    doomed = Sandbox.create(timeout=120, **opts)
    kept = Sandbox.create(timeout=120, **opts)
    slot = _slot_of(server, doomed.sandbox_id)
    init_pid = int((server.data_dir / "sandboxes" / slot / "init.pid").read_text())
    server.kill9()
    os.kill(init_pid, signal.SIGKILL)
    server.start()

    listed = {s.sandbox_id for s in Sandbox.list(**opts).next_items()}
    assert listed == {kept.sandbox_id}
    assert slot not in server.slots()
    assert slot not in _runtime_containers()
    logs = httpx.get(
        f"{server.url}/v2/sandboxes/{doomed.sandbox_id}/logs",
        headers={"X-API-KEY": server.keys[0]},
    ).json()["logs"]
    assert [e["fields"]["kind"] for e in logs][-1] == "died"


def test_sandbox_unknown_to_the_store_is_destroyed(server: ServerProcess) -> None:
    """A sandbox the store lost (its row gone) is destroyed at start, not left running."""
    opts = _opts(server)
    lost = Sandbox.create(timeout=120, **opts)
    slot = _slot_of(server, lost.sandbox_id)
    server.kill9()
    with sqlite3.connect(server.data_dir / "bac.db") as db:
        db.execute("DELETE FROM sandboxes WHERE sandbox_id = ?", (lost.sandbox_id,))
    server.start()
    assert Sandbox.list(**opts).next_items() == []
    assert slot not in server.slots()
    assert slot not in _runtime_containers()


def test_expired_while_down_is_killed_at_start(server: ServerProcess) -> None:
    """A sandbox whose end passed while the server was down is killed right after start."""
    opts = _opts(server)
    short = Sandbox.create(timeout=120, **opts)
    short.set_timeout(1)
    end = short.get_info().end_at
    server.kill9()
    server.start()
    assert datetime.now(UTC) > end, "precondition: the end passed while the server was down"
    assert not short.is_running()
    assert Sandbox.list(**opts).next_items() == []


def _start_in_background(server: ServerProcess) -> threading.Thread:
    def start() -> None:
        with contextlib.suppress(RuntimeError):  # stopped before it was ready
            server.start()

    starting = threading.Thread(target=start, daemon=True)
    starting.start()
    return starting


def test_stop_during_the_expiry_kill_at_start_finishes_it(server: ServerProcess) -> None:
    """A clean stop while the start is killing an expired sandbox waits for that kill:
    nothing of the sandbox is left half torn down."""
    opts = _opts(server)
    short = Sandbox.create(timeout=120, **opts)
    slot = _slot_of(server, short.sandbox_id)
    # Many files make removing its layer take a while: the stop lands in the kill.
    short.commands.run("mkdir /home/user/many && cd /home/user/many && seq 60000 | xargs touch")
    short.set_timeout(1)
    server.kill9()
    starting = _start_in_background(server)
    record = server.data_dir / "sandboxes" / slot / "state.json"
    deadline = time.monotonic() + 120
    # Nothing announces the kill across the process boundary: poll its record.
    while True:
        try:
            if '"phase": "destroying"' in record.read_text():
                break
        except FileNotFoundError:
            raise AssertionError("precondition: the kill was caught under way") from None
        assert time.monotonic() < deadline, "the expired sandbox was never killed"
    assert server.proc is not None
    server.proc.send_signal(signal.SIGTERM)
    starting.join()
    server.proc.wait(timeout=90)
    assert slot not in server.slots()
    assert slot not in _runtime_containers()
    server.start()
    assert Sandbox.list(**opts).next_items() == []
