"""``bac artefacts promote|ls|get|rm`` against a real server and a real sandbox."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_runs import bac_cli

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_promote_list_get_and_remove(cli_env: dict[str, str], sandbox_id: str,
                                     tmp_path: Path) -> None:
    """A file promoted twice is one artefact (the second says so); other content under
    the name fails with exit code 1; ls lists it (table, -q, --json); get writes its bytes;
    rm deletes it, after which get is not found (exit code 4)."""
    run = f"cli-{time.monotonic_ns()}"
    local = tmp_path / "r.txt"
    local.write_text("result\n")
    wrote = bac_cli(cli_env, "files", "cp", str(local), f"{sandbox_id}:/home/user/r.txt")
    assert wrote.exit_code == 0, wrote.output
    first = bac_cli(cli_env, "artefacts", "promote", sandbox_id, "/home/user/r.txt", "r.txt",
                    "--run", run, "--json")
    assert first.exit_code == 0, first.output
    made = json.loads(first.stdout)
    assert (made["name"], made["kind"], made["sizeBytes"], made["created"]) == (
        "r.txt", "file", 7, True)
    again = bac_cli(cli_env, "artefacts", "promote", sandbox_id, "/home/user/r.txt", "r.txt",
                    "--run", run)
    assert again.exit_code == 0 and "already promoted" in again.stdout, again.output
    assert made["sha256"] in again.stdout
    local.write_text("other\n")
    assert bac_cli(cli_env, "files", "cp", str(local),
                   f"{sandbox_id}:/home/user/r.txt").exit_code == 0
    clash = bac_cli(cli_env, "artefacts", "promote", sandbox_id, "/home/user/r.txt", "r.txt",
                    "--run", run)
    assert clash.exit_code == 1 and "other content" in clash.output, clash.output
    listed = bac_cli(cli_env, "artefacts", "ls", "--run", run, "--json")
    assert listed.exit_code == 0, listed.output
    assert [a["sha256"] for a in json.loads(listed.stdout)] == [made["sha256"]]
    assert bac_cli(cli_env, "artefacts", "ls", "--run", run, "-q").stdout == "r.txt\n"
    assert "r.txt" in bac_cli(cli_env, "artefacts", "ls", "--run", run).stdout
    target = tmp_path / "got.txt"
    got = bac_cli(cli_env, "artefacts", "get", run, "r.txt", "-o", str(target))
    assert got.exit_code == 0, got.output
    assert target.read_text() == "result\n"
    assert bac_cli(cli_env, "artefacts", "rm", run, "r.txt").exit_code == 0
    gone = bac_cli(cli_env, "artefacts", "get", run, "r.txt", "-o", str(tmp_path / "no"))
    assert gone.exit_code == 4 and not (tmp_path / "no").exists(), gone.output
    empty = bac_cli(cli_env, "artefacts", "ls", "--run", run, "--json")
    assert json.loads(empty.stdout) == []
