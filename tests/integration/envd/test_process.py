"""The process service through the official e2b SDK: run, stream, stdin, kill, reattach."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from e2b import CommandExitException, NotFoundException, Sandbox, TimeoutException
from e2b.sandbox_sync.commands.command_handle import CommandHandle
from envd_harness import Envd, wait_all_exit

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def test_run_returns_stdout_stderr_and_exit_code(sandbox: Sandbox) -> None:
    """A command's stdout, stderr and exit code come back separately and intact."""
    result = sandbox.commands.run("echo out; echo err >&2; exit 0")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 0)


def test_nonzero_exit_raises_with_go_style_error(sandbox: Sandbox) -> None:
    """exit 3 surfaces as CommandExitException with exit_code 3 and 'exit status 3'."""
    with pytest.raises(CommandExitException) as caught:
        sandbox.commands.run("echo partial; exit 3")
    assert caught.value.exit_code == 3
    assert caught.value.error == "exit status 3"
    assert caught.value.stdout == "partial\n"


def test_environment_layers_and_no_leak_between_commands(sandbox: Sandbox) -> None:
    """PATH/HOME/USER/LOGNAME + /init env + request env (request wins); nothing leaks."""
    result = sandbox.commands.run(
        'echo "$USER|$LOGNAME|$HOME|$BAC_SANDBOX_VAR|$ONLY_HERE"; test -n "$PATH"',
        envs={"ONLY_HERE": "x", "BAC_SANDBOX_VAR": "overridden"},
    )
    assert result.stdout == "root|root|/root|overridden|x\n"
    later = sandbox.commands.run('echo "$BAC_SANDBOX_VAR|${ONLY_HERE:-unset}"')
    assert later.stdout == "from-init|unset\n"


def test_cwd_defaults_to_workdir_and_resolves_relative_to_home(
    sandbox: Sandbox, envd: Envd, workdir: Path
) -> None:
    """Default cwd is /init's defaultWorkdir; an explicit cwd is used; '~' is home."""
    assert sandbox.commands.run("pwd").stdout.strip() == str(envd.workdir)
    assert sandbox.commands.run("pwd", cwd=str(workdir)).stdout.strip() == str(workdir)
    assert sandbox.commands.run("pwd", cwd="~").stdout.strip() == "/root"


def test_missing_cwd_is_invalid_argument(sandbox: Sandbox) -> None:
    """A cwd that does not exist is refused with a clear message, nothing runs."""
    from e2b import InvalidArgumentException

    with pytest.raises(InvalidArgumentException, match="cwd '/no/such/dir' does not exist"):
        sandbox.commands.run("true", cwd="/no/such/dir")


def read_stdout_until(handle: CommandHandle, marker: str) -> str:
    """Consume the handle's events until stdout contains ``marker``."""
    seen = ""
    for stdout, _, _ in handle:
        seen += stdout or ""
        if marker in seen:
            return seen
    raise AssertionError(f"stream ended before {marker!r}; got {seen!r}")


def test_output_streams_before_the_process_ends(sandbox: Sandbox) -> None:
    """stdout arrives while the process still runs (it is blocked reading our stdin)."""
    handle = sandbox.commands.run(
        "echo first; read line; echo second $line", background=True, stdin=True
    )
    assert read_stdout_until(handle, "first\n") == "first\n"
    sandbox.commands.send_stdin(handle.pid, "go\n")
    result = handle.wait()
    assert result.stdout == "first\nsecond go\n"


def test_broken_utf8_tail_is_replaced_not_lost(sandbox: Sandbox) -> None:
    """8191 'a' + a lone 0xE2 byte decode to the same text plus U+FFFD (E2B SDK test)."""
    result = sandbox.commands.run(r"printf 'a%.0s' $(seq 8191); printf '\xe2'")
    assert result.stdout == "a" * 8191 + "\ufffd"


def test_large_output_is_complete(sandbox: Sandbox) -> None:
    """5 MB of output arrives completely and in order."""
    result = sandbox.commands.run("seq 1 700000")
    assert result.stdout == "".join(f"{i}\n" for i in range(1, 700001))


def test_stdin_send_and_close(sandbox: Sandbox) -> None:
    """send_stdin feeds the process; close_stdin gives it EOF."""
    handle = sandbox.commands.run("cat; echo done", background=True, stdin=True)
    sandbox.commands.send_stdin(handle.pid, "line one\n")
    sandbox.commands.send_stdin(handle.pid, b"line two\n")
    sandbox.commands.close_stdin(handle.pid)
    assert handle.wait().stdout == "line one\nline two\ndone\n"


def test_stream_input_delivers_chunks_in_order(sandbox: Sandbox) -> None:
    """The client-streaming StreamInput RPC writes every chunk, in order."""
    handle = sandbox.commands.run("cat", background=True, stdin=True)
    sandbox.commands.stream_input(handle.pid, (f"{i}\n".encode() for i in range(200)))
    sandbox.commands.close_stdin(handle.pid)
    assert handle.wait().stdout == "".join(f"{i}\n" for i in range(200))


def test_stdin_disabled_refuses_input(sandbox: Sandbox) -> None:
    """A command started with stdin=False has no stdin to write to."""
    from e2b import SandboxException

    handle = sandbox.commands.run("sleep 30", background=True, stdin=False)
    try:
        with pytest.raises(SandboxException, match="stdin not enabled or closed"):
            sandbox.commands.send_stdin(handle.pid, "x")
    finally:
        handle.kill()


def test_list_shows_running_commands(sandbox: Sandbox) -> None:
    """commands.list reports a running command with its cmd, args and envs."""
    handle = sandbox.commands.run("sleep 30", background=True, envs={"LISTED": "1"})
    try:
        listed = {p.pid: p for p in sandbox.commands.list()}
        assert handle.pid in listed
        assert listed[handle.pid].cmd == "/bin/bash"
        assert listed[handle.pid].args[-1] == "sleep 30"
        assert listed[handle.pid].envs == {"LISTED": "1"}
    finally:
        handle.kill()
    with pytest.raises(CommandExitException):
        handle.wait()  # the end event arrives once envd has reaped it
    assert handle.pid not in {p.pid for p in sandbox.commands.list()}


def test_kill_ends_the_whole_process_tree(sandbox: Sandbox) -> None:
    """Killing a command kills its children, grandchildren and a child that ran setsid."""
    handle = sandbox.commands.run(
        "sleep 300 & echo pid $!; (sleep 300 & echo pid $!; wait) & echo pid $!; "
        "setsid sh -c 'echo pid $$; exec sleep 300' & wait",
        background=True,
    )
    seen = ""
    for stdout, _, _ in handle:
        seen += stdout or ""
        if seen.count("pid ") == 4 and seen.endswith("\n"):
            break
    tree = {handle.pid} | {int(word) for word in seen.split() if word.isdigit()}
    assert len(tree) == 5 and all(os.path.exists(f"/proc/{pid}") for pid in tree)
    assert sandbox.commands.kill(handle.pid) is True
    assert wait_all_exit(tree, timeout=10) == set()
    with pytest.raises(CommandExitException) as caught:
        handle.wait()
    assert caught.value.exit_code == -1
    assert caught.value.error == "signal: killed"


def test_kill_unknown_pid_returns_false(sandbox: Sandbox) -> None:
    """SendSignal for a pid envd does not know answers not_found (SDK: False)."""
    assert sandbox.commands.kill(999_999) is False


def test_connect_unknown_pid_is_not_found(sandbox: Sandbox) -> None:
    """Connect to an unknown pid raises NotFoundException with envd's message."""
    with pytest.raises(NotFoundException, match="process with pid 999999 not found"):
        sandbox.commands.connect(999_999)


def test_send_stdin_unknown_pid_is_not_found(sandbox: Sandbox) -> None:
    """SendInput to an unknown pid is not_found, not a crash."""
    with pytest.raises(NotFoundException, match="process with pid 999999 not found"):
        sandbox.commands.send_stdin(999_999, "x")


def test_process_survives_disconnect_and_reconnects_by_pid(sandbox: Sandbox) -> None:
    """After the client disconnects the process keeps running; Connect re-attaches."""
    handle = sandbox.commands.run("read x; echo got $x", background=True, stdin=True)
    handle.disconnect()
    assert handle.pid in {p.pid for p in sandbox.commands.list()}
    again = sandbox.commands.connect(handle.pid)
    sandbox.commands.send_stdin(handle.pid, "hello\n")
    assert again.wait().stdout == "got hello\n"


def test_timeout_kills_the_process(sandbox: Sandbox) -> None:
    """Start's Connect-Timeout-Ms is the process lifetime: it is killed when it elapses."""
    started = threading.Event()
    pids: list[int] = []
    with pytest.raises((TimeoutException, CommandExitException)):
        sandbox.commands.run(
            "echo $$; sleep 300",
            timeout=2,
            on_stdout=lambda text: (pids.append(int(text.split()[0])), started.set()),
        )
    assert started.is_set()
    assert wait_all_exit({pids[0]}, timeout=10) == set()


def test_a_process_left_running_may_write_after_its_command_ended(sandbox: Sandbox,
                                                                    tmp_path: Path) -> None:
    """A command that starts a process and exits (as `gtk-launch firefox` does) ends at
    once; what it left running keeps its stdout and stderr: its writes after the end are
    dropped, not answered with SIGPIPE (which killed a browser that printed a warning)."""
    gate, marker = tmp_path / "gate", tmp_path / "wrote"
    os.mkfifo(gate)
    result = sandbox.commands.run(
        f"(read _ < {gate}; echo late; echo late >&2; echo more; touch {marker}) & "
        "echo $!")
    left = int(result.stdout.split()[0])
    assert result.stdout == f"{left}\n" and os.path.exists(f"/proc/{left}")
    with open(gate, "w") as opened:  # the command has ended: now it writes
        opened.write("go\n")
    assert wait_all_exit({left}, timeout=10) == set()
    assert marker.exists(), "the process left running died at its first write"
    assert sandbox.commands.run("echo next").stdout == "next\n"
