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
