"""PTY sessions through the official e2b SDK: input, output, resize, reattach, kill."""

from __future__ import annotations

import pytest
from e2b import CommandExitException, PtySize, Sandbox
from e2b.sandbox_sync.commands.command_handle import CommandHandle

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def read_pty_until(handle: CommandHandle, marker: bytes) -> bytes:
    seen = b""
    for _, _, pty in handle:
        seen += pty or b""
        if marker in seen:
            return seen
    raise AssertionError(f"PTY stream ended before {marker!r}; got {seen!r}")


def test_pty_runs_an_interactive_shell(sandbox: Sandbox) -> None:
    """Input typed into the PTY is executed by the shell and its output comes back."""
    handle = sandbox.pty.create(PtySize(rows=24, cols=80))
    sandbox.pty.send_stdin(handle.pid, b"echo $((6*7)); tty\n")
    seen = read_pty_until(handle, b"/dev/pts/")
    assert b"42" in seen
    sandbox.pty.send_stdin(handle.pid, b"exit 0\n")
    assert handle.wait().exit_code == 0


def test_pty_resize_changes_stty_size(sandbox: Sandbox) -> None:
    """The initial size and a later resize are what `stty size` reports."""
    handle = sandbox.pty.create(PtySize(rows=24, cols=80))
    sandbox.pty.send_stdin(handle.pid, b"stty size\n")
    read_pty_until(handle, b"24 80")
    sandbox.pty.resize(handle.pid, PtySize(rows=40, cols=120))
    sandbox.pty.send_stdin(handle.pid, b"stty size; exit\n")
    read_pty_until(handle, b"40 120")
    handle.wait()


def test_pty_is_the_controlling_terminal(sandbox: Sandbox) -> None:
    """Ctrl-C in the PTY interrupts the foreground job (job control works)."""
    handle = sandbox.pty.create(PtySize(rows=24, cols=80))
    # The foreground job announces itself first: a ^C typed before the terminal left
    # readline's raw mode would be read as a character, not turned into SIGINT.
    sandbox.pty.send_stdin(handle.pid, b"sh -c 'echo job-$((1+1)); exec sleep 300'\n")
    read_pty_until(handle, b"job-2")
    sandbox.pty.send_stdin(handle.pid, b"\x03")
    # bash abandons the rest of a line whose job died of SIGINT: ask for $? separately.
    sandbox.pty.send_stdin(handle.pid, b"echo status-$?\n")
    read_pty_until(handle, b"status-130")
    sandbox.pty.kill(handle.pid)


def test_pty_reconnect_after_disconnect(sandbox: Sandbox) -> None:
    """A PTY session survives its stream going away and can be reattached by pid."""
    handle = sandbox.pty.create(PtySize(rows=24, cols=80))
    handle.disconnect()
    again = sandbox.pty.connect(handle.pid)
    sandbox.pty.send_stdin(handle.pid, b"echo reattached-$((1+1))\n")
    read_pty_until(again, b"reattached-2")
    sandbox.pty.send_stdin(handle.pid, b"exit 3\n")
    with pytest.raises(CommandExitException) as caught:
        again.wait()
    assert caught.value.exit_code == 3


def test_pty_kill(sandbox: Sandbox) -> None:
    """Killing a PTY session ends it with signal: killed."""
    handle = sandbox.pty.create(PtySize(rows=24, cols=80))
    assert sandbox.pty.kill(handle.pid) is True
    with pytest.raises(CommandExitException) as caught:
        handle.wait()
    assert caught.value.error == "signal: killed"
