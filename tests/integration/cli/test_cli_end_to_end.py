"""The `bac` CLI against a real server: tables and JSON, exec, files, shell, keys."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sdk_server import BAC, BacServer

from bac.cli import cli

pytestmark = [pytest.mark.root, pytest.mark.slow]


def bac_cli(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, input=stdin)


@pytest.fixture
def sandbox_id(cli_env: dict[str, str]) -> Iterator[str]:
    """A sandbox created with `bac sandbox create`, killed after the test."""
    created = bac_cli(cli_env, "sandbox", "create", "--timeout", "120", "-m", "owner=cli",
                      "--json")
    assert created.exit_code == 0, created.output
    sid = json.loads(created.stdout)["sandboxId"]
    yield sid
    bac_cli(cli_env, "sandbox", "kill", sid)


def test_list_and_info(cli_env: dict[str, str], sandbox_id: str) -> None:
    """The new sandbox shows up in list (table and JSON) and info with its metadata."""
    listed = bac_cli(cli_env, "sandbox", "list", "-m", "owner=cli", "--json")
    assert listed.exit_code == 0, listed.output
    assert sandbox_id in [s["sandboxId"] for s in json.loads(listed.stdout)]
    table = bac_cli(cli_env, "sandbox", "list")
    assert sandbox_id in table.stdout and "running" in table.stdout
    info = bac_cli(cli_env, "sandbox", "info", sandbox_id, "--json")
    assert json.loads(info.stdout)["metadata"] == {"owner": "cli"}


def test_exec_streams_and_returns_exit_code(cli_env: dict[str, str], sandbox_id: str) -> None:
    """`bac exec` prints stdout/stderr and exits with the command's code."""
    ok = bac_cli(cli_env, "exec", sandbox_id, "--", "echo", "hello world")
    assert (ok.exit_code, ok.stdout) == (0, "hello world\n")
    failed = bac_cli(cli_env, "exec", sandbox_id, "--", "echo out; echo err >&2; exit 42")
    assert failed.exit_code == 42
    assert failed.stdout == "out\n" and failed.stderr == "err\n"


def test_exec_forwards_stdin(cli_env: dict[str, str], sandbox_id: str) -> None:
    """Piped local stdin reaches the remote command, which sees end-of-file after it."""
    result = bac_cli(cli_env, "exec", sandbox_id, "--", "wc -l", stdin="a\nb\nc\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "3"


def test_files_cp_round_trip(cli_env: dict[str, str], sandbox_id: str, tmp_path: Path) -> None:
    """A file copied in and back out is byte-identical; a missing remote path exits 4."""
    local = tmp_path / "data.bin"
    local.write_bytes(os.urandom(3 * 1024 * 1024 + 7))
    up = bac_cli(cli_env, "files", "cp", str(local), f"{sandbox_id}:/tmp/data.bin")
    assert up.exit_code == 0, up.output
    back = tmp_path / "back.bin"
    down = bac_cli(cli_env, "files", "cp", f"{sandbox_id}:/tmp/data.bin", str(back))
    assert down.exit_code == 0, down.output
    assert back.read_bytes() == local.read_bytes()
    missing = bac_cli(cli_env, "files", "cp", f"{sandbox_id}:/tmp/nope", str(tmp_path))
    assert missing.exit_code == 4
    assert missing.stderr.startswith("error:")


def test_timeout_and_kill(cli_env: dict[str, str], sandbox_id: str) -> None:
    """timeout extends the sandbox; kill removes it; killing again exits 4."""
    extended = bac_cli(cli_env, "sandbox", "timeout", sandbox_id, "900")
    assert extended.exit_code == 0, extended.output
    info = json.loads(bac_cli(cli_env, "sandbox", "info", sandbox_id, "--json").stdout)
    assert info["state"] == "running"
    assert bac_cli(cli_env, "sandbox", "kill", sandbox_id).exit_code == 0
    again = bac_cli(cli_env, "sandbox", "kill", sandbox_id)
    assert again.exit_code == 4
    gone = bac_cli(cli_env, "exec", sandbox_id, "--", "true")
    assert gone.exit_code == 4 and "Traceback" not in gone.output


def test_keys_list(bac_server: BacServer) -> None:
    """`bac keys list --json` shows the teams' keys by prefix, never the secret."""
    result = bac_cli(bac_server.env, "keys", "list", "--json")
    assert result.exit_code == 0, result.output
    keys = json.loads(result.stdout)
    assert {"sdk-tests", "other-team"} <= {k["team"] for k in keys}
    assert bac_server.api_key not in result.stdout


def _read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{marker!r} not seen in {bytes(seen)[-500:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            assert chunk, f"terminal closed before {marker!r}: {bytes(seen)[-500:]!r}"
            seen.extend(chunk)


def _drain(fd: int, seen: bytearray) -> None:
    """Whatever the terminal still holds, once its writer has exited."""
    while select.select([fd], [], [], 0.5)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        seen.extend(chunk)


def test_shell_in_a_real_terminal(cli_env: dict[str, str], sandbox_id: str) -> None:
    """`bac shell` in a pseudo-terminal: typing runs commands, resizing reaches the PTY."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 90, 0, 0))
    proc = subprocess.Popen(
        [*BAC, "shell", sandbox_id], stdin=slave, stdout=slave, stderr=slave,
        env={**os.environ, **cli_env}, start_new_session=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        # Type only once the remote shell has drawn something: bac is connected by then.
        _read_until(master, b"$ ", seen)
        os.write(master, b"stty size; echo SH''ELL\r")
        _read_until(master, b"SHELL", seen)
        assert b"30 90" in seen
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
        os.killpg(proc.pid, signal.SIGWINCH)
        # The resize travels asynchronously; ask again until the new size shows (deadline).
        deadline = time.monotonic() + 20
        while b"50 120" not in seen:
            assert time.monotonic() < deadline, bytes(seen)[-500:]
            os.write(master, b"stty size\r")
            with contextlib.suppress(AssertionError):
                _read_until(master, b"50 120", seen, timeout=1)
        os.write(master, b"exit 5\r")
        code = proc.wait(timeout=30)
        if code != 5:  # what the CLI printed last says why (a Python fatal error, a trace)
            _drain(master, seen)
        assert code == 5, bytes(seen)[-1500:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
