"""What ``bac exec`` and ``bac files cp`` refuse before touching a sandbox, and where a
download goes: a trailing slash names a directory (made if missing), never a file."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_stub import Stub, bac_cli

from bac.cli._copy import _local_target
from bac.cli._output import CliError


def test_exec_it_needs_a_terminal(stub: Stub) -> None:
    """-it with piped stdin is refused (exit 2), as docker refuses it."""
    result = bac_cli(stub, "exec", "-it", "sbx1", "--", "python3")
    assert result.exit_code == 2 and "TTY" in result.stderr
    assert stub.requests == []


def test_cp_of_a_directory_needs_r(stub: Stub, tmp_path: Path) -> None:
    """A local directory is copied only with -r (exit 2 before any request)."""
    (tmp_path / "d").mkdir()
    result = bac_cli(stub, "files", "cp", str(tmp_path / "d"), "sbx1:/tmp/")
    assert result.exit_code == 2 and "-r" in result.stderr
    assert stub.requests == []


def test_trailing_slash_names_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Downloading to `dl/` makes the directory dl and puts the file in it, never a file
    named dl; a missing parent without a slash fails clearly (exit 4)."""
    monkeypatch.chdir(tmp_path)
    assert _local_target("dl/", "big.bin", False) == Path("dl/big.bin")
    assert (tmp_path / "dl").is_dir()
    assert _local_target("dl", "big.bin", False) == Path("dl/big.bin")
    assert _local_target("copy.bin", "big.bin", False) == Path("copy.bin")
    with pytest.raises(CliError) as missing:
        _local_target("nodir/copy.bin", "big.bin", False)
    assert missing.value.exit_code == 4
