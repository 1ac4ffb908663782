"""The official e2b JavaScript SDKs (npm, versions pinned in js/package.json) against Bac:
``e2b`` and ``@e2b/desktop``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bac_process import ServerProcess

JS_DIR = Path(__file__).parent / "js"


def _node_modules() -> None:
    modules = JS_DIR / "node_modules"
    if (modules / "e2b").is_dir() and (modules / "@e2b" / "desktop").is_dir():
        return
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr


def _run(server: ServerProcess, script: str) -> dict[str, Any]:
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
        ["node", script], cwd=JS_DIR, env=env, capture_output=True, text=True, timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_js_sdk_smoke(server: ServerProcess) -> None:
    """Create, run a command, write and read a file, kill: all through the JS SDK."""
    result = _run(server, "smoke.mjs")
    assert result["stdout"] == "from-js\nuser\n"
    assert result["exitCode"] == 0
    assert result["file"] == "written by js"
    assert result["metadata"] == {"sdk": "js"}
    assert result["runningBeforeKill"] is True
    assert result["runningAfterKill"] is False


def test_js_desktop_sdk_smoke(server: ServerProcess) -> None:
    """@e2b/desktop: create (the desktop template), a screenshot of the whole screen, the
    screen size, the mouse moved and read back, a command as the user, kill."""
    from test_e2b_desktop import _template_built

    if not _template_built():
        pytest.skip("desktop template not built")
    result = _run(server, "desktop_smoke.mjs")
    assert result["pngSignature"] == "89504e470d0a1a0a" and result["pngBytes"] > 10_000
    assert result["screen"] == {"width": 1024, "height": 768}
    assert result["cursor"] == {"x": 100, "y": 200}
    assert result["user"] == "user"


def test_bac_extras_from_node(server: ServerProcess) -> None:
    """js/bac-sdk beside the official e2b SDK: checkpoint, restore by name (an unknown
    one a 404 BacError), the trace paged and for a run, fork read through e2b's connect,
    pause twice and resume, the trace followed until the kill, a wrong key refused."""
    result = _run(server, "bac_extras.mjs")
    assert result["checkpointName"] == "v1"
    assert result["afterRestore"] == "v1"
    assert result["checkpoints"] == ["v1"]
    assert result["unknownCheckpoint"]["status"] == 404
    assert result["unknownCheckpoint"]["isBacError"] is True
    assert "no checkpoint with the id or name \"nope\"" in result["unknownCheckpoint"]["message"]
    assert any("traced-from-js" in cmd for cmd in result["tracedCommands"])
    assert result["runEvents"] > 0
    assert result["forkReads"] == "v1" and result["forkIsOther"] is True
    assert result["paused"] is True and result["pausedAgain"] is False
    assert result["afterResume"] == "v1"
    assert result["followedKinds"][0] == "created" and "process" in result["followedKinds"]
    assert result["wrongKey"] == 401
