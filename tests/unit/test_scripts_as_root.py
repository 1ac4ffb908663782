"""The README's two commands need root: run by a user on a machine without sudo, each
says so in one line and exits 1 before touching anything (it used to be the shell's
'sudo: command not found')."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

pytestmark = pytest.mark.root  # becomes another user


@pytest.mark.parametrize("script", ["up", "test", "setup"])
def test_a_user_without_sudo_is_told_to_run_it_as_root(script: str) -> None:
    # Not pytest's tmp_path: its parents are root's alone (0700), and nobody must read it.
    with tempfile.TemporaryDirectory(prefix="bac-as-root-") as where:
        _check(Path(where), script)


def _check(tmp_path: Path, script: str) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    for name in (script, "as-root.sh"):
        shutil.copy(SCRIPTS / name, checkout / "scripts" / name)
    tools = tmp_path / "bin"  # what a minimal machine has, and no sudo
    tools.mkdir()
    for tool in ("bash", "id", "basename", "dirname"):
        found = shutil.which(tool)
        assert found is not None
        os.symlink(found, tools / tool)
    for path in (tmp_path, checkout, checkout / "scripts", tools):
        path.chmod(0o755)
    runuser = shutil.which("runuser")
    assert runuser is not None
    done = subprocess.run(
        [runuser, "-u", "nobody", "--", str(tools / "bash"), str(checkout / "scripts" / script)],
        env={"PATH": str(tools)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == (f"bac: {script} must run as root (sandboxes need namespaces, "
                           "cgroups and mounts): run it as root, or install sudo\n")
