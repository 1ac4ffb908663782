"""Commands through the gateway with the official SDK: streaming, background, stdin,
kill, timeouts, exit codes, and a sandbox killed mid-command."""

from __future__ import annotations

import threading

import pytest
from e2b import Sandbox
from e2b.exceptions import SandboxException, TimeoutException
from e2b.sandbox.commands.command_handle import CommandExitException


def test_output_streams_to_callbacks_in_order(sbx: Sandbox) -> None:
    """on_stdout/on_stderr get the output as produced; the result has both and exit code 0."""
    out: list[str] = []
    err: list[str] = []
    result = sbx.commands.run(
        "for i in 1 2 3; do echo out$i; echo err$i >&2; done",
        on_stdout=out.append, on_stderr=err.append,
    )
    assert "".join(out) == "out1\nout2\nout3\n"
    assert "".join(err) == "err1\nerr2\nerr3\n"
    assert result.stdout == "out1\nout2\nout3\n" and result.exit_code == 0


def test_stdout_arrives_before_the_command_ends(sbx: Sandbox) -> None:
    """A line is delivered while the process is still running (no buffering in between)."""
    got_line = threading.Event()

    def on_stdout(chunk: str) -> None:
        if "ready" in chunk:
            got_line.set()

    handle = sbx.commands.run("echo ready; read x; echo done", background=True, stdin=True)
    collector = threading.Thread(target=lambda: handle.wait(on_stdout=on_stdout))
    collector.start()
    assert got_line.wait(15), "first line not delivered while the command was running"
    handle.send_stdin("go\n")
    collector.join(15)
    assert not collector.is_alive()


def test_nonzero_exit_raises_command_exit(sbx: Sandbox) -> None:
    """A failing command raises CommandExitException with its code and output."""
    with pytest.raises(CommandExitException) as failed:
        sbx.commands.run("echo oops >&2; exit 7")
    assert failed.value.exit_code == 7
    assert failed.value.stderr == "oops\n"


def test_background_command_and_wait(sbx: Sandbox) -> None:
    """A background command is listed, then waited for."""
    handle = sbx.commands.run("sleep 0.5; echo bg", background=True)
    assert handle.pid in {p.pid for p in sbx.commands.list()}
    assert handle.wait().stdout == "bg\n"


def test_stdin_reaches_the_process(sbx: Sandbox) -> None:
    """send_stdin feeds a running process; closing stdin ends `cat`."""
    handle = sbx.commands.run("cat", background=True, stdin=True)
    sbx.commands.send_stdin(handle.pid, "hello stdin\n")
    handle.close_stdin()
    assert handle.wait().stdout == "hello stdin\n"


def test_kill_a_running_command(sbx: Sandbox) -> None:
    """kill stops a running command; waiting on it reports the signal exit."""
    handle = sbx.commands.run("sleep 60", background=True)
    assert sbx.commands.kill(handle.pid) is True
    with pytest.raises(CommandExitException):
        handle.wait()
    assert handle.pid not in {p.pid for p in sbx.commands.list()}


def test_command_timeout(sbx: Sandbox) -> None:
    """A command longer than its timeout raises TimeoutException."""
    with pytest.raises(TimeoutException):
        sbx.commands.run("sleep 30", timeout=1)


def test_reconnect_to_a_background_command(sbx: Sandbox) -> None:
    """commands.connect re-attaches to a process by pid and gets its later output."""
    handle = sbx.commands.run("read x; echo got $x", background=True, stdin=True)
    handle.disconnect()
    again = sbx.commands.connect(handle.pid)
    sbx.commands.send_stdin(handle.pid, "it\n")
    assert again.wait().stdout == "got it\n"


def test_sandbox_killed_while_a_command_runs() -> None:
    """Killing the sandbox mid-command makes the SDK raise its 'not running' error."""
    sbx = Sandbox.create()
    handle = sbx.commands.run("sleep 60", background=True)
    threading.Timer(0.5, sbx.kill).start()
    with pytest.raises(SandboxException) as ended:
        handle.wait()
    assert "killed" in str(ended.value) or "not running" in str(ended.value).lower() or (
        "was not found" in str(ended.value)
    )
    assert sbx.is_running() is False


def test_user_cwd_and_envs(sbx: Sandbox) -> None:
    """Default user is `user` in /home/user; cwd, user and envs per command work."""
    assert sbx.commands.run("whoami; pwd").stdout == "user\n/home/user\n"
    assert sbx.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sbx.commands.run("whoami", user="root").stdout == "root\n"
    assert sbx.commands.run("echo $X", envs={"X": "y"}).stdout == "y\n"
