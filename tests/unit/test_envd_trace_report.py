"""envd's reports to the host (``bac_envd._trace``) on real unix datagram sockets: one JSON
object a report; what could not be sent (no socket, the host's queue full) is counted and
told in the next report that goes out; an empty path sends nothing."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bac_envd import _trace


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "trace.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(5)
        _trace._unsent = 0
        yield path, sock


def test_a_report_is_one_json_datagram(host: tuple[str, socket.socket]) -> None:
    path, sock = host
    assert _trace.report("process", {"pid": 7, "cmd": "ls"}, path) is True
    assert json.loads(sock.recv(65536)) == {"kind": "process", "pid": 7, "cmd": "ls"}


def test_unsent_reports_are_counted_and_told_next(host: tuple[str, socket.socket],
                                                  tmp_path: Path) -> None:
    path, sock = host
    missing = str(tmp_path / "nobody-listens.sock")
    assert _trace.report("process", {"pid": 1}, missing) is False
    assert _trace.report("process", {"pid": 2}, missing) is False
    assert _trace.report("process", {"pid": 3}, path) is True
    assert json.loads(sock.recv(65536)) == {"kind": "process", "pid": 3, "unsent": 2}
    assert _trace.report("process", {"pid": 4}, path) is True
    assert "unsent" not in json.loads(sock.recv(65536))


def test_a_full_queue_never_blocks_the_sender(host: tuple[str, socket.socket]) -> None:
    path, sock = host
    sent = [_trace.report("transfer", {"bytes": n}, path) for n in range(2000)]
    # The host read nothing: the kernel's queue filled and later reports were refused
    # at once (MSG_DONTWAIT), not waited for.
    assert sent[0] is True and sent.count(False) > 0
    refused = sent.count(False)
    sock.setblocking(False)
    while True:
        try:
            sock.recv(65536)
        except BlockingIOError:  # drained
            break
    sock.settimeout(5)
    assert _trace.report("transfer", {"bytes": -1}, path) is True
    assert json.loads(sock.recv(65536))["unsent"] == refused


def test_an_empty_path_turns_reports_off() -> None:
    _trace._unsent = 0
    assert _trace.report("process", {"pid": 1}, "") is False
    assert _trace._unsent == 0


def test_the_keepers_restart_report_is_one_the_host_accepts(
        host: tuple[str, socket.socket]) -> None:
    """The keeper's hand-built ``envd_restarted`` datagram parses on the host as an error
    event naming the restart count and how envd ended."""
    from bac_envd._keeper import report_restart
    from bac_server.control.sandboxes._trace import parse_report

    path, sock = host
    assert report_restart(3, 9, 12.5, path) is True  # status 9: killed by SIGKILL
    kind, level, message, fields = parse_report(sock.recv(65536), 16 * 1024)
    assert (kind.value, level) == ("envd_restarted", "error")
    assert fields == {"kind": "envd_restarted", "count": 3, "signal": 9, "uptime_s": 12.5}
    assert "killed by signal 9" in message and "restart 3" in message
    assert report_restart(4, 1 << 8, 0.25, path) is True  # exited 1
    assert parse_report(sock.recv(65536), 16 * 1024)[3]["exit_code"] == 1


def test_an_init_forwarded_to_the_keeper_rebuilds_the_same_state() -> None:
    """Each applied ``/init`` goes down the keeper's pipe as one frame; the keeper applying
    the frames in order ends with envd's state (token, merged env vars, defaults)."""
    import os

    from bac_envd._bootstrap import _loads
    from bac_envd._state import EnvdState

    envd, keeper = EnvdState(), EnvdState()
    read_fd, write_fd = os.pipe()
    envd.forward = write_fd
    envd.apply_init({"accessToken": "t1", "envVars": {"A": "1", "Q": 'x"\\\u00e9'},
                     "defaultUser": "user"})
    envd.apply_init({"envVars": {"B": "2"}, "defaultWorkdir": "/w", "accessToken": ""})
    os.close(write_fd)
    data = os.read(read_fd, 65536)
    os.close(read_fd)
    while data:
        size = int.from_bytes(data[:4], "big")
        keeper.apply_init(_loads(data[4:4 + size]), forward=False)
        data = data[4 + size:]
    for name in ("access_token", "env_vars", "default_user", "default_workdir"):
        assert getattr(keeper, name) == getattr(envd, name), name
    assert keeper.access_token is None and keeper.env_vars["Q"] == 'x"\\\u00e9'
