"""The process service on the wire (raw Connect client): details the SDK hides."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from protobuf import Oneof

from bac_protocol.envd import process_pb as pb
from bac_protocol.envd.process_connect import ProcessClientSync

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def start(
    rpc: ProcessClientSync,
    cmd: str,
    *args: str,
    tag: str | None = None,
    headers: dict[str, str] | None = None,
    stdin: bool | None = None,
    timeout_ms: int | None = None,
) -> Iterator[Any]:
    request = pb.StartRequest(
        process=pb.ProcessConfig(cmd=cmd, args=list(args)), tag=tag, stdin=stdin
    )
    for response in rpc.start(request, headers=headers, timeout_ms=timeout_ms):
        yield response.event.event


def collect(events: Iterator[Any]) -> tuple[int, list[tuple[str, bytes]], Any]:
    first = next(events)
    assert first.field == "start"
    chunks, end = [], None
    for event in events:
        if event.field == "data":
            chunks.append((event.value.output.field, event.value.output.value))
        elif event.field == "end":
            end = event.value
    assert end is not None
    return first.value.pid, chunks, end


def test_binary_output_is_byte_exact_in_bounded_chunks(
    process_rpc: ProcessClientSync, tmp_path: Path
) -> None:
    """1 MiB of random bytes arrive unchanged, split in chunks of at most 32 KiB."""
    blob = tmp_path / "blob"
    blob.write_bytes(bytes(range(256)) * 4096)
    _, chunks, end = collect(start(process_rpc, "/bin/cat", str(blob)))
    data = b"".join(chunk for stream, chunk in chunks if stream == "stdout")
    assert hashlib.sha256(data).digest() == hashlib.sha256(blob.read_bytes()).digest()
    assert max(len(chunk) for _, chunk in chunks) <= 32 * 1024
    assert (end.exit_code, end.exited, end.status, end.has_field("error")) == (
        0,
        True,
        "exit status 0",
        False,
    )


def test_first_event_is_start_with_the_real_pid(process_rpc: ProcessClientSync) -> None:
    """The stream opens with start{pid}; that pid is the process itself."""
    pid, chunks, _ = collect(start(process_rpc, "/bin/sh", "-c", "echo $$"))
    assert chunks == [("stdout", f"{pid}\n".encode())]


def test_exec_failure_is_invalid_argument(process_rpc: ProcessClientSync) -> None:
    """A command that cannot be executed is refused with invalid_argument."""
    with pytest.raises(ConnectError) as caught:
        collect(start(process_rpc, "/no/such/binary"))
    assert caught.value.code == Code.INVALID_ARGUMENT
    assert "/no/such/binary" in caught.value.message


def test_signal_end_event_values(process_rpc: ProcessClientSync) -> None:
    """A process killed by a signal ends with exitCode -1, exited false, Go's wording."""
    _, _, end = collect(start(process_rpc, "/bin/sh", "-c", "kill -TERM $$"))
    assert (end.exit_code, end.exited, end.status, end.error) == (
        -1,
        False,
        "signal: terminated",
        "signal: terminated",
    )


def test_tag_selects_a_process(process_rpc: ProcessClientSync) -> None:
    """A tagged process is listed with its tag and can be addressed by it."""
    events = start(process_rpc, "/bin/sleep", "30", tag="worker-1")
    pid = next(events).value.pid
    listed = {p.pid: p for p in process_rpc.list(pb.ListRequest()).processes}
    assert listed[pid].tag == "worker-1"
    by_tag = pb.ProcessSelector(selector=Oneof("tag", "worker-1"))
    process_rpc.send_signal(pb.SendSignalRequest(process=by_tag, signal=pb.Signal.SIGKILL))
    end = next(e for e in events if e.field == "end").value
    assert end.status == "signal: killed"
    with pytest.raises(ConnectError) as caught:
        process_rpc.send_signal(pb.SendSignalRequest(process=by_tag, signal=pb.Signal.SIGKILL))
    assert caught.value.code == Code.NOT_FOUND
    assert caught.value.message == "process with tag worker-1 not found"


def test_unknown_signal_is_unimplemented(process_rpc: ProcessClientSync) -> None:
    """Only SIGTERM and SIGKILL are accepted."""
    events = start(process_rpc, "/bin/sleep", "30")
    pid = next(events).value.pid
    selector = pb.ProcessSelector(selector=Oneof("pid", pid))
    try:
        with pytest.raises(ConnectError) as caught:
            process_rpc.send_signal(pb.SendSignalRequest(process=selector))
        assert caught.value.code == Code.UNIMPLEMENTED
    finally:
        process_rpc.send_signal(pb.SendSignalRequest(process=selector, signal=pb.Signal.SIGKILL))
        list(events)


def test_keepalive_events_follow_the_requested_interval(process_rpc: ProcessClientSync) -> None:
    """With Keepalive-Ping-Interval: 1 a silent process's stream carries keepalives."""
    events = start(
        process_rpc,
        "/bin/sh",
        "-c",
        "sleep 3.5; echo done",
        headers={"keepalive-ping-interval": "1"},
    )
    kinds = [event.field for event in events]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert kinds.count("keepalive") >= 2
    assert kinds.index("data") > kinds.index("keepalive")


def test_exited_process_end_event_is_kept_for_late_connect(
    process_rpc: ProcessClientSync,
) -> None:
    """Connect right after a process exited still gets start and the end event."""
    pid, _, _ = collect(start(process_rpc, "/bin/sh", "-c", "exit 7"))
    selector = pb.ProcessSelector(selector=Oneof("pid", pid))
    replay = [r.event.event for r in process_rpc.connect(pb.ConnectRequest(process=selector))]
    assert [e.field for e in replay] == ["start", "end"]
    assert replay[0].value.pid == pid
    assert (replay[1].value.exit_code, replay[1].value.status) == (7, "exit status 7")
    # ...but it is no longer running: control RPCs do not find it.
    with pytest.raises(ConnectError) as caught:
        process_rpc.close_stdin(pb.CloseStdinRequest(process=selector))
    assert caught.value.code == Code.NOT_FOUND


def test_stdin_absent_means_enabled(process_rpc: ProcessClientSync) -> None:
    """A StartRequest without the stdin field gets a writable stdin (old clients)."""
    events = start(process_rpc, "/bin/cat")
    pid = next(events).value.pid
    selector = pb.ProcessSelector(selector=Oneof("pid", pid))
    data = pb.ProcessInput(input=Oneof("stdin", b"echoed"))
    process_rpc.send_input(pb.SendInputRequest(process=selector, input=data))
    process_rpc.close_stdin(pb.CloseStdinRequest(process=selector))
    chunks = [e.value.output.value for e in events if e.field == "data"]
    assert b"".join(chunks) == b"echoed"


def test_pty_input_to_a_pipe_process_is_refused(process_rpc: ProcessClientSync) -> None:
    """Input aimed at the PTY of a process that has pipes is an error, not a crash."""
    events = start(process_rpc, "/bin/cat")
    pid = next(events).value.pid
    selector = pb.ProcessSelector(selector=Oneof("pid", pid))
    try:
        with pytest.raises(ConnectError) as caught:
            process_rpc.send_input(
                pb.SendInputRequest(
                    process=selector, input=pb.ProcessInput(input=Oneof("pty", b"x"))
                )
            )
        assert caught.value.code == Code.INTERNAL
        with pytest.raises(ConnectError):
            size = pb.PTY(size=pb.PTY.Size(cols=10, rows=10))
            process_rpc.update(pb.UpdateRequest(process=selector, pty=size))
    finally:
        process_rpc.close_stdin(pb.CloseStdinRequest(process=selector))
        list(events)


def test_unknown_user_is_unauthenticated(process_rpc: ProcessClientSync) -> None:
    """Authorization: Basic with a user the sandbox lacks is refused (unauthenticated)."""
    import base64

    header = "Basic " + base64.b64encode(b"nosuchuser:").decode()
    with pytest.raises(ConnectError) as caught:
        collect(start(process_rpc, "/bin/true", headers={"authorization": header}))
    assert caught.value.code == Code.UNAUTHENTICATED
    assert "nosuchuser" in caught.value.message
