"""The official e2b JavaScript SDK (npm, version pinned in js/package.json) against Bac."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from bac_process import ServerProcess

JS_DIR = Path(__file__).parent / "js"


def _node_modules() -> None:
    if (JS_DIR / "node_modules" / "e2b").is_dir():
        return
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr


def test_js_sdk_smoke(server: ServerProcess) -> None:
    """Create, run a command, write and read a file, kill: all through the JS SDK."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed")
    _node_modules()
    env = {
        **os.environ,
        "E2B_API_URL": server.url,
        "E2B_SANDBOX_URL": server.url,
        "E2B_API_KEY": server.keys[0],
    }
    done = subprocess.run(
        ["node", "smoke.mjs"], cwd=JS_DIR, env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["stdout"] == "from-js\nuser\n"
    assert result["exitCode"] == 0
    assert result["file"] == "written by js"
    assert result["metadata"] == {"sdk": "js"}
    assert result["runningBeforeKill"] is True
    assert result["runningAfterKill"] is False
