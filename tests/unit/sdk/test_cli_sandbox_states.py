"""A sandbox's lifecycle in the CLI's words, against a stub of the REST API: a paused
sandbox shows its state, not an end; a second resume says it is already running; restore
takes a checkpoint's name as well as its id."""

from __future__ import annotations

import re

from cli_stub import Stub, bac_cli, checkpoint, sandbox


def test_paused_sandbox_shows_its_state_not_an_end(stub: Stub) -> None:
    """A paused sandbox's ENDS IN is 'never (paused)', not seconds or 'expired' (its
    stale endAt is in the past), in list and info; a running one shows time left."""
    stub.sandboxes["sbx1"] = sandbox("sbx1", "paused", end="2026-01-01T00:05:00Z")
    stub.sandboxes["sbx2"] = sandbox("sbx2", "running")
    rows = {line.split()[0]: line for line in bac_cli(stub, "sandbox", "ls").stdout.splitlines()}
    assert "never (paused)" in rows["sbx1"]
    assert re.search(r"running .* \d+d\d\dh ", rows["sbx2"])
    info = bac_cli(stub, "sandbox", "info", "sbx1").stdout
    assert "expired" not in info and "endAt" not in info
    assert re.search(r"^endsIn +never \(paused\)$", info, re.M)


def test_no_end_shows_never(stub: Stub) -> None:
    """A sandbox created with timeout 0 (endAt in year 9999) never ends."""
    stub.sandboxes["sbx1"] = sandbox("sbx1", "running", end="9999-12-31T23:59:59Z")
    assert "never" in bac_cli(stub, "sandbox", "ls", "--no-headers").stdout


def test_resume_of_a_running_sandbox_says_so(stub: Stub) -> None:
    """A second resume says the sandbox is already running and sends no connect."""
    stub.sandboxes["sbx1"] = sandbox("sbx1", "running")
    result = bac_cli(stub, "sandbox", "resume", "sbx1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("sbx1 is already running")
    assert not [path for _, path in stub.requests if path.endswith("/connect")]
    stub.sandboxes["sbx1"]["state"] = "paused"
    resumed = bac_cli(stub, "sandbox", "resume", "sbx1")
    assert resumed.stdout.startswith("resumed sbx1")


def test_restore_by_name(stub: Stub) -> None:
    """restore takes a checkpoint's name as well as its id; a shared name is refused (2),
    an unknown one is not found (4)."""
    stub.sandboxes["sbx1"] = sandbox("sbx1", "running")
    stub.checkpoints = [checkpoint("c01", "before"), checkpoint("c02", "twice"),
                        checkpoint("c03", "twice")]
    by_name = bac_cli(stub, "sandbox", "restore", "sbx1", "before")
    assert by_name.exit_code == 0, by_name.output
    assert ("POST", "/sandboxes/sbx1/checkpoints/c01/restore") in stub.requests
    by_id = bac_cli(stub, "sandbox", "restore", "sbx1", "c03")
    assert by_id.exit_code == 0, by_id.output
    assert ("POST", "/sandboxes/sbx1/checkpoints/c03/restore") in stub.requests
    shared = bac_cli(stub, "sandbox", "restore", "sbx1", "twice")
    assert shared.exit_code == 2 and "c02, c03" in shared.stderr
    unknown = bac_cli(stub, "sandbox", "restore", "sbx1", "nope")
    assert unknown.exit_code == 4 and "nope" in unknown.stderr
