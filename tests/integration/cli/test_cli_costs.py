"""``bac usage``, ``bac caps`` and ``bac sandbox create --cost-cap`` against a real server."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner, Result

from bac.cli import cli

pytestmark = [pytest.mark.root, pytest.mark.slow]


def bac_cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def test_a_capped_sandbox_and_its_usage(cli_env: dict[str, str]) -> None:
    """--cost-cap makes the sandbox's own cap (listed by `bac caps list`); `bac usage ID`
    shows its life with that cap, or its days asked; a group's report has the total."""
    run = f"t{time.monotonic_ns()}"
    made = bac_cli(cli_env, "sandbox", "create", "--timeout", "60", "--metadata", f"run={run}",
                   "--cost-cap", "2.5", "--cost-cap-action", "kill", "--json")
    assert made.exit_code == 0, made.output
    sandbox_id = json.loads(made.stdout)["sandboxId"]
    try:
        listed = bac_cli(cli_env, "caps", "list", "--json")
        assert listed.exit_code == 0, listed.output
        [cap] = [c for c in json.loads(listed.stdout) if c["sandboxID"] == sandbox_id]
        assert (cap["scope"], cap["limit"], cap["action"]) == ("sandbox", 2.5, "kill")
        assert sandbox_id in bac_cli(cli_env, "caps", "list").stdout
        life = bac_cli(cli_env, "usage", sandbox_id, "--json")
        assert life.exit_code == 0, life.output
        assert json.loads(life.stdout)["sandboxID"] == sandbox_id
        assert [c["capID"] for c in json.loads(life.stdout)["caps"]] == [cap["capID"]]
        shown = bac_cli(cli_env, "usage", sandbox_id)
        assert shown.exit_code == 0 and cap["capID"] in shown.stdout, shown.output
        today = datetime.now(UTC).date().isoformat()
        report = bac_cli(cli_env, "usage", sandbox_id, "--since", today, "--json")
        assert report.exit_code == 0, report.output
        assert [g["key"] for g in json.loads(report.stdout)["groups"]] == [sandbox_id]
        table = bac_cli(cli_env, "usage", "--group-by", "metadata.run", "--metadata",
                        f"run={run}")
        assert table.exit_code == 0, table.output
        assert "metadata.run" in table.stdout and "USD" in table.stdout
        assert table.stdout.strip().splitlines()[-1].startswith("total: ")
    finally:
        assert bac_cli(cli_env, "sandbox", "kill", sandbox_id).exit_code == 0


def test_caps_create_set_delete(cli_env: dict[str, str]) -> None:
    made = bac_cli(cli_env, "caps", "create", "--metadata", "run=cli-caps", "--limit", "3",
                   "--period", "day")
    assert made.exit_code == 0, made.output
    cap_id = made.stdout.strip()
    team = bac_cli(cli_env, "caps", "create", "--team", "--period", "month", "--limit", "1000",
                   "--json")
    assert team.exit_code == 0, team.output
    team_cap = json.loads(team.stdout)
    assert (team_cap["scope"], team_cap["period"], team_cap["action"]) == (
        "team", "month", "pause")
    try:
        raised = bac_cli(cli_env, "caps", "set", cap_id, "--limit", "4.5", "--json")
        assert raised.exit_code == 0, raised.output
        assert (json.loads(raised.stdout)["limit"], json.loads(raised.stdout)["action"]) == (
            4.5, "pause")
        shown = bac_cli(cli_env, "caps", "set", cap_id, "--action", "kill")
        assert shown.exit_code == 0 and "kill" in shown.stdout and "4.5" in shown.stdout
        assert "run=cli-caps" in bac_cli(cli_env, "caps", "list").stdout
    finally:
        assert bac_cli(cli_env, "caps", "delete", team_cap["capID"]).exit_code == 0
        assert bac_cli(cli_env, "caps", "delete", cap_id).exit_code == 0
    again = bac_cli(cli_env, "caps", "delete", cap_id)
    assert again.exit_code == 4 and cap_id in again.stderr
    missing = bac_cli(cli_env, "caps", "set", cap_id, "--limit", "1")
    assert missing.exit_code == 4 and len(missing.stderr.strip().splitlines()) == 1


def _state(env: dict[str, str], cap_id: str) -> str:
    listed = bac_cli(env, "caps", "list", "--json")
    assert listed.exit_code == 0, listed.output
    [cap] = [c for c in json.loads(listed.stdout) if c["capID"] == cap_id]
    return str(cap["state"])


def test_a_create_under_a_reached_cap_exits_3(cli_env: dict[str, str]) -> None:
    """A group cap reached refuses `bac sandbox create` in its group: exit 3, one line naming
    the cap; raised, the same create succeeds."""
    run = f"t{time.monotonic_ns()}"
    made = bac_cli(cli_env, "caps", "create", "--metadata", f"run={run}", "--limit", "1e-9")
    assert made.exit_code == 0, made.output
    cap_id = made.stdout.strip()
    first = bac_cli(cli_env, "sandbox", "create", "--timeout", "60", "-m", f"run={run}")
    assert first.exit_code == 0, first.output
    started = [first.stdout.strip()]
    try:
        # The server meters and enforces on its own clock: poll the cap's state.
        deadline = time.monotonic() + 30
        while _state(cli_env, cap_id) != "reached":
            assert time.monotonic() < deadline, "the cap was not reached within 30 s"
            time.sleep(0.2)
        refused = bac_cli(cli_env, "sandbox", "create", "--timeout", "60", "-m", f"run={run}")
        assert refused.exit_code == 3, refused.output
        assert len(refused.stderr.strip().splitlines()) == 1 and cap_id in refused.stderr
        assert bac_cli(cli_env, "caps", "set", cap_id, "--limit", "1000").exit_code == 0
        again = bac_cli(cli_env, "sandbox", "create", "--timeout", "60", "-m", f"run={run}")
        assert again.exit_code == 0, again.output
        started.append(again.stdout.strip())
    finally:
        assert bac_cli(cli_env, "sandbox", "kill", *started).exit_code == 0
        assert bac_cli(cli_env, "caps", "delete", cap_id).exit_code == 0
