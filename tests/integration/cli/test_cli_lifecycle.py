"""A sandbox's lifecycle through the CLI on a real server: a paused sandbox shows its
state rather than an end, a second resume says it is already running, and restore takes
a checkpoint's name."""

from __future__ import annotations

import pytest
from cli_runs import bac_cli

pytestmark = [pytest.mark.root, pytest.mark.slow]



def test_pause_and_resume_wording(cli_env: dict[str, str], sandbox_id: str) -> None:
    """Paused: list and info say it never ends while paused; resume resumes it once, then
    says it is already running."""
    assert bac_cli(cli_env, "sandbox", "pause", sandbox_id).exit_code == 0
    row = bac_cli(cli_env, "sandbox", "list", "--no-headers", "-s", "paused").stdout
    assert row.startswith(sandbox_id) and "never (paused)" in row
    info = bac_cli(cli_env, "sandbox", "info", sandbox_id).stdout
    assert "never (paused)" in info and "expired" not in info
    first = bac_cli(cli_env, "sandbox", "resume", sandbox_id)
    assert first.exit_code == 0 and first.stdout.startswith(f"resumed {sandbox_id}")
    second = bac_cli(cli_env, "sandbox", "resume", sandbox_id)
    assert second.exit_code == 0, second.output
    assert second.stdout.startswith(f"{sandbox_id} is already running")


def test_restore_by_name(cli_env: dict[str, str], sandbox_id: str) -> None:
    """`bac sandbox restore SBX before` rolls back to the checkpoint named before."""
    bac_cli(cli_env, "exec", sandbox_id, "--", "echo one > /tmp/state")
    taken = bac_cli(cli_env, "sandbox", "checkpoint", sandbox_id, "-n", "before",
                    "--no-memory")
    assert taken.exit_code == 0, taken.output
    bac_cli(cli_env, "exec", sandbox_id, "--", "echo two > /tmp/state")
    restored = bac_cli(cli_env, "sandbox", "restore", sandbox_id, "before")
    assert restored.exit_code == 0, restored.output
    state = bac_cli(cli_env, "exec", sandbox_id, "--", "cat /tmp/state")
    assert state.stdout == "one\n"
    unknown = bac_cli(cli_env, "sandbox", "restore", sandbox_id, "never-taken")
    assert unknown.exit_code == 4 and "never-taken" in unknown.stderr
