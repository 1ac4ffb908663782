"""The CLI parses arguments strictly and reports every failure as one line with an exit code."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

import bac
from bac.cli import cli
from bac.cli._exec import command_line
from bac.cli._files import split_remote
from bac.cli._output import exit_code_for


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL nothing listens on (the port was just released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BAC_API_KEY", "E2B_API_KEY", "BAC_API_URL", "E2B_API_URL"):
        monkeypatch.delenv(name, raising=False)


def test_version(runner: CliRunner) -> None:
    """--version prints the package version."""
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert bac.__version__ in result.output


def test_missing_key_is_one_line_exit_3(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """No API key: exit 3 and a single error line, no traceback."""
    _no_env(monkeypatch)
    result = runner.invoke(cli, ["sandbox", "list"])
    assert result.exit_code == 3
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "BAC_API_KEY" in lines[0]
    assert "Traceback" not in result.output


def test_unreachable_server_exit_7(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, closed_port_url: str
) -> None:
    """A server that is not listening is reported as unreachable (exit 7)."""
    _no_env(monkeypatch)
    result = runner.invoke(
        cli, ["--api-url", closed_port_url, "--api-key", "k", "sandbox", "info", "abc"]
    )
    assert result.exit_code == 7, result.output
    assert "cannot reach the Bac API" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["exec", "sbx"],  # no command
        ["sandbox", "create", "--metadata", "novalue"],
        ["sandbox", "create", "--timeout", "-1"],  # 0 is valid: no end
        ["sandbox", "timeout", "sbx", "-5"],
        ["sandbox", "list", "--state", "exploded"],
        ["files", "cp", "a", "b"],
        ["files", "cp", "s1:/a", "s2:/b"],
        ["sandbox", "kill"],
        ["--api-url", "localhost:3000", "sandbox", "info", "abc"],
    ],
)
def test_usage_errors_exit_2(runner: CliRunner, args: list[str]) -> None:
    """Malformed arguments fail with exit 2 before any request is sent."""
    result = runner.invoke(cli, ["--api-key", "k", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_shell_needs_a_terminal(runner: CliRunner) -> None:
    """`bac shell` refuses to start without a TTY and points to `bac exec`."""
    result = runner.invoke(cli, ["--api-key", "k", "shell", "sbx"])
    assert result.exit_code == 2
    assert "bac exec" in result.output


def test_exec_passes_dashed_arguments_through(runner: CliRunner, closed_port_url: str) -> None:
    """Options after `--` belong to the remote command, not to bac."""
    result = runner.invoke(
        cli, ["--api-url", closed_port_url, "--api-key", "k", "exec", "sbx", "--", "ls", "-la"]
    )
    assert result.exit_code == 7  # parsing succeeded; the server is simply not there


def test_command_line_quoting() -> None:
    """One argument is a shell string; several are quoted word by word."""
    assert command_line(("echo $HOME | wc -c",)) == "echo $HOME | wc -c"
    assert command_line(("echo", "a b", "$X")) == "echo 'a b' '$X'"


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("abc123:/home/user/x", ("abc123", "/home/user/x")),
        ("abc123:rel/x", ("abc123", "rel/x")),
        ("abc123:", ("abc123", "")),
        ("./local:file", None),
        ("/abs/path", None),
        ("C-d:x", None),
        ("plain", None),
    ],
)
def test_remote_spec(spec: str, parsed: tuple[str, str] | None) -> None:
    """Only SANDBOX_ID:PATH with an alphanumeric id is remote."""
    assert split_remote(spec) == parsed


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (bac.InvalidArgumentError("x"), 2),
        (bac.AuthenticationError("x"), 3),
        (bac.SandboxNotFoundError("x"), 4),
        (bac.PathNotFoundError("x"), 4),
        (bac.TimeoutError("x"), 5),
        (bac.SandboxNotRunningError("x"), 6),
        (bac.ServerUnreachableError("x"), 7),
        (bac.RateLimitError("x"), 8),
        (bac.ServerError("x"), 1),
    ],
)
def test_exit_codes(error: bac.SandboxError, code: int) -> None:
    """Each SDK error class has a documented exit code."""
    assert exit_code_for(error) == code
