"""Stopping the server while its warm pool is starting slots leaves nothing behind.

A clean stop (SIGTERM) waits for every start in flight and tears them all down; after a
crash (SIGKILL) with the runtime still making a slot's container, the next start ends that
runtime call and removes the slot.

The moments are chosen by watching the data dir and the process table: slot records in
phase ``creating``, and the runtime's ``run --bundle <slot dir>`` command, which the test
holds with SIGSTOP so that it is still in flight when the server dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir

pytestmark = pytest.mark.root

T = TypeVar("T")
_RUNTIME_STATE = Path("/run/bac/runtime")
_LEASES = Path("/run/bac/addresses")
_CGROUPS = Path("/sys/fs/cgroup")
_DEADLINE_S = 120.0


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess(fresh_data_dir("restart-pool"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
    remove_data_dir(srv)


def _records(server: ServerProcess) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for slot in server.slots():
        with contextlib.suppress(OSError, ValueError):
            found[slot] = json.loads((server.data_dir / "sandboxes" / slot / "state.json")
                                     .read_text())
    return found


def _runtime_call_slot(pid: int, server: ServerProcess) -> str | None:
    """The slot a runtime ``run`` process is making for ``server``, if ``pid`` is one."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if b"run" not in argv or b"--bundle" not in argv[:-1]:
        return None
    bundle = Path(os.fsdecode(argv[argv.index(b"--bundle") + 1]))
    return bundle.name if bundle.parent == server.data_dir / "sandboxes" else None


def _runtime_calls(server: ServerProcess) -> dict[int, str]:
    calls: dict[int, str] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        if (slot := _runtime_call_slot(int(entry), server)) is not None:
            calls[int(entry)] = slot
    return calls


def _left_of(server: ServerProcess, slot: str) -> list[str]:
    """What of ``slot`` still exists on the host (empty once it is fully removed)."""
    root = server.data_dir / "sandboxes" / slot
    found = [f"slot dir {root}"] if root.exists() else []
    if (_RUNTIME_STATE / slot).exists():
        found.append(f"runtime state {_RUNTIME_STATE / slot}")
    found += [f"cgroup {_CGROUPS / c / 'bac' / slot}" for c in os.listdir(_CGROUPS)
              if (_CGROUPS / c / "bac" / slot).is_dir()]
    if f"{root}/" in Path("/proc/self/mountinfo").read_text():
        found.append(f"mount under {root}")
    for lease in os.listdir(_LEASES) if _LEASES.is_dir() else []:
        with contextlib.suppress(FileNotFoundError):
            if (_LEASES / lease).read_text().startswith(f"{root}\n"):
                found.append(f"address lease {lease}")
    found += [f"runtime process {pid}" for pid, s in _runtime_calls(server).items()
              if s == slot]
    return found


def _poll(what: str, found: Callable[[], T | None], timeout: float = _DEADLINE_S) -> T:
    # Nothing announces these moments across the process boundary: poll with a deadline
    # (without pausing: a runtime call lasts a fraction of a second).
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (result := found()) is not None:
            return result
    raise AssertionError(f"timed out waiting for {what}")


def _during_pool_fill(server: ServerProcess, caught: Callable[[], T | None]) -> T:
    """The first thing ``caught`` returns while the warm pool is being filled; a pool found
    already full is emptied by a clean restart, which makes it fill again."""

    def attempt() -> T | None:
        if (found := caught()) is not None:
            return found
        records = _records(server)
        if len(records) >= 2 and all(r["phase"] == "pooled" for r in records.values()):
            server.stop()
            server.start()
        return None

    return _poll("the warm pool starting slots", attempt)


def _hold_runtime_call(server: ServerProcess) -> tuple[int, str] | None:
    """SIGSTOP a runtime ``run`` the server has in flight: (its pidfd, its slot), or None."""
    for pid in _runtime_calls(server):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        # Checked once the pidfd pins the process: a signal through it reaches this
        # process or none, never one that reused the pid.
        slot = _runtime_call_slot(pid, server)
        with contextlib.suppress(ProcessLookupError):
            if slot is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGSTOP)
                if _stopped(pid):
                    return pidfd, slot
        os.close(pidfd)
    return None


def _stopped(pid: int) -> bool:
    """``pid`` took the stop (rather than exiting first)."""

    def state() -> str | None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return "X"
        letter = stat[stat.rindex(")") + 2]
        return letter if letter in "TtZX" else None  # the stop is delivered asynchronously

    return _poll("the stop to take", state, timeout=5) in "Tt"


def _exited(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def _release(pidfd: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    os.close(pidfd)


def test_sigterm_while_the_pool_starts_slots_leaves_nothing(server: ServerProcess) -> None:
    """A clean stop during the warm pool's fill tears down every slot being started before
    the server exits."""
    seen = _during_pool_fill(server, lambda: {s for s, r in _records(server).items()
                                              if r["phase"] == "creating"} or None)
    server.stop()
    assert server.proc is not None and server.proc.returncode in (0, -signal.SIGTERM)
    seen |= set(server.slots())
    assert [left for slot in sorted(seen) for left in _left_of(server, slot)] == []


def test_sigkill_with_the_runtime_mid_start_is_repaired_at_start(
        server: ServerProcess) -> None:
    """After kill -9 while the runtime was making a pool slot's container, the next start
    ends that runtime call and removes everything of the slot."""
    pidfd, slot = _during_pool_fill(server, lambda: _hold_runtime_call(server))
    try:
        server.kill9()
        assert not _exited(pidfd), "precondition: the runtime call outlived the server"
        server.start()
        assert _exited(pidfd), "the runtime call of a dead server's slot still runs"
        assert _left_of(server, slot) == []
    finally:
        _release(pidfd)


def _hold_server_before_a_record(server: ServerProcess) -> str | None:
    """SIGSTOP the server between a slot's mkdir and its first record: that slot, or None
    (the server let go again) if the record was written first."""
    root = server.data_dir / "sandboxes"
    for slot in os.listdir(root) if root.is_dir() else []:
        if (root / slot / "state.json").exists():
            continue
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        if _stopped(server.proc.pid) and (root / slot).is_dir() \
                and not (root / slot / "state.json").exists():
            return slot
        server.proc.send_signal(signal.SIGCONT)
    return None


def test_sigkill_before_a_slot_record_is_repaired_at_start(server: ServerProcess) -> None:
    """A slot directory a crash left without a record (killed between its mkdir and its
    first record) is removed at the next start, not only after a grace period."""
    slot = _during_pool_fill(server, lambda: _hold_server_before_a_record(server))
    server.kill9()
    server.start()
    assert _left_of(server, slot) == []
