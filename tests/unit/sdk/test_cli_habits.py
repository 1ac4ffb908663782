"""The CLI's docker/kubectl habits, against a stub of the REST API: plain columns when
piped, -q, --format json|table, --no-headers, the ls/rm aliases, and one exit-code table
shared by the code, `bac --help` and docs/sdk.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_stub import Stub, bac_cli, sandbox
from click.testing import CliRunner

import bac
from bac.cli import cli
from bac.cli._output import EXIT_CODE_MEANINGS, EXIT_CODES, exit_code_for, plain_table

DOCS = Path(__file__).resolve().parents[3] / "docs" / "sdk.md"



def test_piped_list_is_plain_columns(stub: Stub) -> None:
    """Piped, `bac sandbox list` has no box drawing; awk's first field is the id."""
    stub.sandboxes["sbx1"] = sandbox("sbx1", "running")
    stub.sandboxes["sbx2"] = sandbox("sbx2", "running")
    result = bac_cli(stub, "sandbox", "list")
    assert result.exit_code == 0, result.output
    assert not re.search("[\u2500-\u257f]", result.stdout)
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["ID", "sbx1", "sbx2"]


def test_quiet_no_headers_and_format(stub: Stub) -> None:
    """-q prints ids only, --no-headers drops the header, --format json|table chooses."""
    stub.sandboxes["sbx1"] = sandbox("sbx1", "running")
    assert bac_cli(stub, "sandbox", "list", "-q").stdout == "sbx1\n"
    rows = bac_cli(stub, "sandbox", "list", "--no-headers").stdout.splitlines()
    assert len(rows) == 1 and rows[0].startswith("sbx1 ")
    listed = json.loads(bac_cli(stub, "sandbox", "list", "--format", "json").stdout)
    assert [s["sandboxId"] for s in listed] == ["sbx1"]
    assert bac_cli(stub, "sandbox", "list", "--json", "--format", "table").stdout.startswith("ID")
    info = json.loads(bac_cli(stub, "sandbox", "info", "sbx1", "--format", "json").stdout)
    assert info["sandboxId"] == "sbx1"


def test_plain_table_pads_columns() -> None:
    """Cells are padded to their column; trailing blanks are dropped."""
    assert plain_table(["A", "BB"], [("xxx", None), ("y", "z")]) == (
        "A     BB\nxxx\ny     z\n")
    assert plain_table(["A"], [], headers=False) == ""


def test_ls_and_rm_aliases(stub: Stub) -> None:
    """`ls` is list and `rm` is kill/delete in every group; help names both."""
    stub.sandboxes["sbx1"] = sandbox("sbx1", "running")
    assert bac_cli(stub, "sandbox", "ls", "-q").stdout == "sbx1\n"
    help_text = bac_cli(stub, "sandbox", "--help").stdout
    assert "list, ls" in help_text and "kill, rm" in help_text
    for group in ("template", "webhooks", "caps", "keys"):
        group_help = bac_cli(stub, group, "--help").stdout
        assert "list, ls" in group_help and ", rm" in group_help, group
    assert "Kill sandboxes" in bac_cli(stub, "sandbox", "rm", "--help").stdout


def _documented_codes() -> dict[int, str]:
    section = DOCS.read_text().partition("Exit codes")[2]
    return {int(code): meaning.strip() for code, meaning in
            re.findall(r"^\| (\d+) +\| (.+?) \|$", section, re.M)}


def test_exit_code_table_in_help_and_docs() -> None:
    """`bac --help` shows every exit code with its meaning; docs/sdk.md shows the same."""
    shown = CliRunner().invoke(cli, ["--help"]).stdout
    for code, meaning in EXIT_CODE_MEANINGS:
        assert re.search(rf"^ +{code}  {re.escape(meaning)}$", shown, re.M), code
    assert {code for _, code in EXIT_CODES} <= {code for code, _ in EXIT_CODE_MEANINGS}
    assert _documented_codes() == dict(EXIT_CODE_MEANINGS)


def test_a_killed_sandbox_is_exit_4_as_documented() -> None:
    """The server forgets a killed sandbox (404: SandboxNotFoundError, exit 4); one that
    ends while a command uses it is SandboxNotRunningError (exit 6). The docs say so."""

    assert exit_code_for(bac.SandboxNotFoundError("gone")) == 4
    assert exit_code_for(bac.SandboxNotRunningError("ended")) == 6
    documented = _documented_codes()
    assert "killed" in documented[4] and "ended" in documented[6]
