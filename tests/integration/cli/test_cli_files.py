"""`bac files` against a real server: a download to `dir/` goes into that directory (made
if missing), never into a file named `dir`; -r copies directories both ways; ls, cat,
mkdir and rm work in the sandbox and fail with the documented codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_runs import bac_cli

pytestmark = [pytest.mark.root, pytest.mark.slow]



def test_download_into_a_new_directory(cli_env: dict[str, str], sandbox_id: str,
                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cp SBX:/tmp/big.bin ./dl/` with no dl/ makes dl/ and writes dl/big.bin."""
    made = bac_cli(cli_env, "exec", sandbox_id, "--", "head -c 300000 /dev/urandom > /tmp/big.bin")
    assert made.exit_code == 0, made.output
    monkeypatch.chdir(tmp_path)
    result = bac_cli(cli_env, "files", "cp", f"{sandbox_id}:/tmp/big.bin", "./dl/")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "dl").is_dir() and (tmp_path / "dl" / "big.bin").stat().st_size == 300000
    nowhere = bac_cli(cli_env, "files", "cp", f"{sandbox_id}:/tmp/big.bin", "./no/such/x")
    assert nowhere.exit_code == 4 and "no such directory" in nowhere.stderr


def test_directories_both_ways(cli_env: dict[str, str], sandbox_id: str,
                               tmp_path: Path) -> None:
    """-r uploads a tree and downloads it back identical; without -r a directory is
    refused (exit 2)."""
    tree = tmp_path / "proj"
    (tree / "sub" / "deep").mkdir(parents=True)
    (tree / "empty").mkdir()
    (tree / "a.txt").write_text("a\n")
    (tree / "sub" / "deep" / "b.bin").write_bytes(os.urandom(70000))
    refused = bac_cli(cli_env, "files", "cp", str(tree), f"{sandbox_id}:/tmp/")
    assert refused.exit_code == 2 and "-r" in refused.stderr
    up = bac_cli(cli_env, "files", "cp", "-r", str(tree), f"{sandbox_id}:/tmp/")
    assert up.exit_code == 0, up.output
    listed = bac_cli(cli_env, "exec", sandbox_id, "--", "cd /tmp/proj && find . | sort")
    assert listed.stdout.split() == [".", "./a.txt", "./empty", "./sub", "./sub/deep",
                                     "./sub/deep/b.bin"]
    down = bac_cli(cli_env, "files", "cp", "-r", f"{sandbox_id}:/tmp/proj", str(tmp_path / "back"))
    assert down.exit_code == 0, down.output
    back = tmp_path / "back"
    assert (back / "a.txt").read_text() == "a\n" and (back / "empty").is_dir()
    assert (back / "sub" / "deep" / "b.bin").read_bytes() == (
        tree / "sub" / "deep" / "b.bin").read_bytes()
    # Into an existing directory, the tree goes under its own name (as cp -r does).
    again = bac_cli(cli_env, "files", "cp", "-r", f"{sandbox_id}:/tmp/proj", str(back))
    assert again.exit_code == 0 and (back / "proj" / "a.txt").is_file()


def test_ls_cat_mkdir_rm(cli_env: dict[str, str], sandbox_id: str) -> None:
    """ls lists (table, -q, json), cat prints bytes, mkdir makes (-p parents), rm removes
    (-r directories); each refuses what cp and rm refuse, with exit 2 or 4."""
    assert bac_cli(cli_env, "files", "mkdir", f"{sandbox_id}:/tmp/w/x").exit_code == 4
    assert bac_cli(cli_env, "files", "mkdir", "-p", f"{sandbox_id}:/tmp/w/x").exit_code == 0
    assert bac_cli(cli_env, "files", "mkdir", f"{sandbox_id}:/tmp/w").exit_code == 1
    bac_cli(cli_env, "exec", sandbox_id, "--", "printf 'one\\ntwo\\n' > /tmp/w/f.txt")
    names = bac_cli(cli_env, "files", "ls", f"{sandbox_id}:/tmp/w", "-q")
    assert names.stdout.split() == ["f.txt", "x"]
    entries = json.loads(bac_cli(cli_env, "files", "ls", sandbox_id, "/tmp/w",
                                 "--format", "json").stdout)
    assert {e["name"]: e["type"] for e in entries} == {"f.txt": "file", "x": "dir"}
    table = bac_cli(cli_env, "files", "ls", f"{sandbox_id}:/tmp/w").stdout
    assert table.splitlines()[0].split()[:3] == ["NAME", "TYPE", "SIZE"]
    cat = bac_cli(cli_env, "files", "cat", f"{sandbox_id}:/tmp/w/f.txt", "/tmp/w/f.txt")
    assert cat.stdout == "one\ntwo\none\ntwo\n"
    assert bac_cli(cli_env, "files", "cat", f"{sandbox_id}:/tmp/w").exit_code == 2
    assert bac_cli(cli_env, "files", "rm", f"{sandbox_id}:/tmp/w").exit_code == 2
    assert bac_cli(cli_env, "files", "rm", f"{sandbox_id}:/tmp/nope").exit_code == 4
    assert bac_cli(cli_env, "files", "rm", "-rf", sandbox_id, "/tmp/w", "/tmp/nope").exit_code == 0
    assert bac_cli(cli_env, "files", "ls", f"{sandbox_id}:/tmp/w").exit_code == 4
