"""envd's start-command supervisor with a template's ready command (``ready_cmd``) and
with the older ``ready_line`` start.json files, as a real process on the host."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from bac_envd._supervisor import StartConfigError, load_config

pytestmark = pytest.mark.root  # the supervisor switches to the configured user


@contextmanager
def supervisor(config: Mapping[str, object], tmp: Path) -> Iterator[tuple[subprocess.Popen[bytes],
                                                                       int]]:
    """The supervisor on ``config``; yields it and the read end of its ready pipe."""
    path = tmp / "start.json"
    path.write_text(json.dumps(config))
    ready_r, ready_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bac_envd._supervisor", "--ready-fd", str(ready_w),
         "--config", str(path)], pass_fds=(ready_w,), stderr=subprocess.PIPE)
    os.close(ready_w)
    try:
        yield proc, ready_r
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)  # reaps it and closes its stderr pipe
        os.close(ready_r)


def wait_for(predicate: object, limit_s: float = 10.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def ready_reported(ready_r: int, limit_s: float) -> bool:
    readable, _, _ = select.select([ready_r], [], [], limit_s)
    return bool(readable) and os.read(ready_r, 16) == b"ready\n"


def test_ready_cmd_gates_readiness(tmp_path: Path) -> None:
    """Ready is reported only once the ready command exits 0, and the service keeps running."""
    gate, mark, count = tmp_path / "gate", tmp_path / "up", tmp_path / "checks"
    os.mkfifo(gate)
    config = {"argv": ["/bin/sh", "-c", f"read x < {gate}; touch {mark}; exec sleep 60"],
              "user": "root", "cwd": str(tmp_path), "ready_cmd": f"echo >> {count}; test -e {mark}",
              "restart": False}
    with supervisor(config, tmp_path) as (proc, ready_r):
        wait_for(lambda: count.exists() and len(count.read_text().splitlines()) >= 2)
        assert not ready_reported(ready_r, 0), "ready before the ready command succeeded"
        with open(gate, "w") as handle:
            handle.write("go\n")
        assert ready_reported(ready_r, 5)
        assert mark.exists()
        assert proc.poll() is None
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                  text=True, check=False).stdout.split()
        cmdlines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children]
        assert b"sleep\x0060\x00" in cmdlines, "the start command is not running"


def test_ready_cmd_without_start_command(tmp_path: Path) -> None:
    """A start.json with only a ready command reports ready when it passes, then exits 0."""
    mark = tmp_path / "up"
    config = {"user": "root", "ready_cmd": f"test -e {mark}"}
    with supervisor(config, tmp_path) as (proc, ready_r):
        assert not ready_reported(ready_r, 0)
        mark.touch()
        assert ready_reported(ready_r, 5)
        assert proc.wait(timeout=5) == 0


def test_ready_line_files_still_work(tmp_path: Path) -> None:
    """A start.json of the older form (ready line written to {ready_fd}) is still honoured."""
    config = {"argv": ["/bin/sh", "-c", "echo ready >&$0; exec sleep 60", "{ready_fd}"],
              "user": "root", "cwd": "/", "env": {}, "ready_line": "ready\n", "restart": True}
    with supervisor(config, tmp_path) as (proc, ready_r):
        assert ready_reported(ready_r, 5)
        assert proc.poll() is None


def test_bad_ready_cmd_is_a_config_error(tmp_path: Path) -> None:
    """An empty ready command, or no argv and no ready command, is rejected by name."""
    path = tmp_path / "start.json"
    path.write_text(json.dumps({"argv": ["true"], "ready_cmd": " "}))
    with pytest.raises(StartConfigError, match="ready_cmd"):
        load_config(str(path))
    path.write_text(json.dumps({"argv": []}))
    with pytest.raises(StartConfigError, match="argv"):
        load_config(str(path))
