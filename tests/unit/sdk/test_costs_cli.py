"""``bac usage``, ``bac caps`` and ``bac sandbox create --cost-cap`` refuse malformed
arguments with exit 2 before any request: they point at a port nothing listens on, where a
request would fail as unreachable (exit 7)."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from bac.cli import cli


@pytest.fixture
def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("args", [
    ["usage", "--group-by", "week"],
    ["usage", "--group-by", "metadata."],
    ["usage", "--since", "2026-12"],
    ["usage", "--until", "yesterday"],
    ["usage", "--since", "2026-12-02", "--until", "2026-12-01"],
    ["usage", "--metadata", "novalue"],
    ["usage", "../caps"],
    ["caps", "create", "--limit", "1"],                                   # covers nothing
    ["caps", "create", "--limit", "1", "--team", "--sandbox", "sbx1"],    # two things
    ["caps", "create", "--limit", "1", "--team", "--metadata", "a=b"],
    ["caps", "create", "--limit", "1", "--metadata", "a=b", "--metadata", "c=d"],
    ["caps", "create", "--limit", "1", "--team"],                         # needs a period
    ["caps", "create", "--limit", "1", "--team", "--period", "total"],
    ["caps", "create", "--limit", "0", "--sandbox", "sbx1"],
    ["caps", "create", "--sandbox", "sbx1"],                              # no limit
    ["caps", "create", "--limit", "1", "--sandbox", "sbx1", "--action", "stop"],
    ["caps", "create", "--limit", "1", "--sandbox", "sbx1", "--period", "week"],
    ["caps", "set", "cap_1"],                                             # nothing to change
    ["caps", "set", "cap_1", "--limit", "-1"],
    ["caps", "delete"],
    ["sandbox", "create", "--cost-cap", "0"],
    ["sandbox", "create", "--cost-cap-action", "kill"],
    ["sandbox", "create", "--cost-cap", "1", "--cost-cap-action", "stop"],
])
def test_bad_arguments_exit_2_without_a_request(closed_port_url: str, args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["--api-url", closed_port_url, "--api-key", "k", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [
    ["usage"],
    ["usage", "sbx1", "--group-by", "metadata.run", "--since", "2026-12-01"],
    ["caps", "list"],
    ["caps", "create", "--limit", "1", "--metadata", "run=r1"],
    ["caps", "create", "--limit", "1", "--team", "--period", "day", "--action", "kill"],
    ["caps", "set", "cap_1", "--action", "kill"],
    ["caps", "delete", "cap_1"],
])
def test_good_arguments_reach_for_the_server(closed_port_url: str, args: list[str]) -> None:
    """Well-formed commands get as far as the request: unreachable, one line, exit 7."""
    result = CliRunner().invoke(cli, ["--api-url", closed_port_url, "--api-key", "k", *args])
    assert result.exit_code == 7, result.output
    assert len(result.output.strip().splitlines()) == 1
