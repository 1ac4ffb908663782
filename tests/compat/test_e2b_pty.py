"""PTY sessions through the gateway with the official SDK."""

from __future__ import annotations

import threading

from e2b import Sandbox
from e2b.sandbox.commands.command_handle import PtySize


def test_pty_input_output_and_resize(sbx: Sandbox) -> None:
    """A PTY echoes typed input, reports its size, follows resize, and ends on exit."""
    output = bytearray()
    seen = threading.Condition()

    def on_data(data: bytes) -> None:
        with seen:
            output.extend(data)
            seen.notify_all()

    def wait_for(text: bytes) -> None:
        with seen:
            assert seen.wait_for(lambda: text in output, timeout=15), bytes(output)[-300:]

    handle = sbx.pty.create(PtySize(rows=24, cols=80))
    reader = threading.Thread(target=lambda: handle.wait(on_pty=on_data), daemon=True)
    reader.start()
    sbx.pty.send_stdin(handle.pid, b"stty size; echo mark$((40+2))\n")
    wait_for(b"24 80")
    wait_for(b"mark42")
    sbx.pty.resize(handle.pid, PtySize(rows=30, cols=100))
    sbx.pty.send_stdin(handle.pid, b"stty size\n")
    wait_for(b"30 100")
    sbx.pty.send_stdin(handle.pid, b"exit\n")
    reader.join(15)
    assert not reader.is_alive()


def test_pty_kill(sbx: Sandbox) -> None:
    """pty.kill ends the terminal's process."""
    handle = sbx.pty.create(PtySize(rows=10, cols=40))
    assert sbx.pty.kill(handle.pid) is True
    assert handle.pid not in {p.pid for p in sbx.commands.list()}
