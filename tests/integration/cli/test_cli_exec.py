"""`bac exec` against a real server: -it runs an interactive program on a terminal, a
SIGINT kills the remote command before the CLI exits 130, --timeout stops the command
with exit 124, -i forwards stdin from a terminal, and a paused sandbox is resumed with a
line saying so."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
import uuid

import pytest
from cli_runs import bac_cli
from sdk_server import BAC

pytestmark = [pytest.mark.root, pytest.mark.slow]



def _read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{marker!r} not seen in {bytes(seen)[-500:]!r}"
        if select.select([fd], [], [], left)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            assert chunk, f"terminal closed before {marker!r}: {bytes(seen)[-500:]!r}"
            seen.extend(chunk)


def _remote_pids(env: dict[str, str], sandbox_id: str, command: str) -> str:
    """Pids of processes running ``command`` (the bracket keeps pgrep's own shell out)."""
    pattern = f"[{command[0]}]{command[1:]}"
    found = bac_cli(env, "exec", sandbox_id, "--", f"pgrep -f '{pattern}' || true")
    assert found.exit_code == 0, found.output
    return found.stdout.strip()


def test_it_runs_python_interactively(cli_env: dict[str, str], sandbox_id: str) -> None:
    """`bac exec -it SBX -- python3` on a terminal: a prompt, an answer, and the exit code
    of the program (not 0 with no output, as without -it)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*BAC, "exec", "-it", sandbox_id, "--", "python3"], stdin=slave,
                            stdout=slave, stderr=slave, env={**os.environ, **cli_env},
                            start_new_session=True)
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, b">>> ", seen)
        os.write(master, b"print(6 * 7)\r")
        _read_until(master, b"42", seen)
        os.write(master, b"\x03")  # Ctrl-C reaches python, which keeps its prompt
        _read_until(master, b"KeyboardInterrupt", seen)
        os.write(master, b"exit(3)\r")
        assert proc.wait(timeout=30) == 3, bytes(seen)[-500:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_sigint_kills_the_remote_command(cli_env: dict[str, str], sandbox_id: str) -> None:
    """Ctrl-C (SIGINT) during `bac exec` exits 130 and the remote process is gone."""
    marker = f"sleep 3{uuid.uuid4().int % 1000:03d}"
    proc = subprocess.Popen([*BAC, "exec", sandbox_id, "--", f"echo started; {marker}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **cli_env}, start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    with proc, proc.stdout, proc.stderr:
        try:
            assert proc.stdout.readline() == b"started\n"
            assert _remote_pids(cli_env, sandbox_id, marker)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 130
            assert b"killed" in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert _remote_pids(cli_env, sandbox_id, marker) == ""


def test_timeout_says_the_command_was_stopped(cli_env: dict[str, str], sandbox_id: str) -> None:
    """--timeout 2 on `sleep 10`: exit 124 and one line saying it was stopped after 2 s."""
    result = bac_cli(cli_env, "exec", "--timeout", "2", sandbox_id, "--", "sleep", "10")
    assert result.exit_code == 124, result.output
    assert result.stderr == "error: the command was stopped after its --timeout of 2 s\n"
    assert _remote_pids(cli_env, sandbox_id, "sleep 10") == ""


def test_piped_stdin_and_tty_output(cli_env: dict[str, str], sandbox_id: str) -> None:
    """Piped stdin is forwarded as before (with or without -i); -t gives the command a
    terminal even when bac's output is a pipe."""
    for flags in ([], ["-i"]):
        piped = bac_cli(cli_env, "exec", *flags, sandbox_id, "--", "wc -l", stdin="a\nb\n")
        assert (piped.exit_code, piped.stdout.strip()) == (0, "2")
    on_tty = bac_cli(cli_env, "exec", "-t", sandbox_id, "--", "test -t 1 && echo tty")
    assert on_tty.exit_code == 0 and on_tty.stdout.strip() == "tty"


def test_exec_on_a_paused_sandbox_resumes_it(cli_env: dict[str, str], sandbox_id: str) -> None:
    """A paused sandbox is resumed (as E2B's connect resumes it) and stderr says so."""
    assert bac_cli(cli_env, "sandbox", "pause", sandbox_id).exit_code == 0
    result = bac_cli(cli_env, "exec", sandbox_id, "--", "echo", "back")
    assert result.exit_code == 0, result.output
    assert result.stdout == "back\n"
    assert f"{sandbox_id} is paused: resuming it" in result.stderr
    assert f"resumed {sandbox_id}; it ends in" in result.stderr
