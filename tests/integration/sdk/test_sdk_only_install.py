"""``pip install bac`` is the SDK and the CLI alone: the server is the ``server`` extra.

Two checks, both through the real tools: pip's resolver (from PyPI, as a user's install
would) lists what a plain install pulls, and none of the server's libraries is among
them; and the SDK and the CLI's client commands run in a Python where every server
library fails to import, while ``bac serve`` says in one line how to get the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
# Distributions only the server needs (the `server` extra of pyproject.toml).
SERVER_ONLY = {"starlette", "uvicorn", "sqlalchemy", "alembic", "aiosqlite", "pyroute2",
               "pydantic", "jinja2", "uvloop", "websockets", "cryptography", "dnspython",
               "prometheus-client", "opentelemetry-sdk", "inotify-simple", "httptools"}
# Import names of the same, for the blocker below.
SERVER_MODULES = ("starlette", "uvicorn", "sqlalchemy", "alembic", "aiosqlite", "pyroute2",
                  "pydantic", "jinja2", "uvloop", "websockets", "cryptography", "dns",
                  "prometheus_client", "opentelemetry", "inotify_simple", "httptools")

BLOCKER = f"""
import importlib.abc, sys
class _NoServer(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVER_MODULES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: SDK only)")
        return None
sys.meta_path.insert(0, _NoServer())
"""


def test_a_plain_install_pulls_no_server_library(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [str(env_dir / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
         "--dry-run", "--ignore-installed", "--report", str(report), str(ROOT)],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    names = {item["metadata"]["name"].lower()
             for item in json.loads(report.read_text())["install"]}
    assert "bac" in names and {"httpx", "connectrpc", "click"} <= names
    assert not names & SERVER_ONLY, sorted(names & SERVER_ONLY)


def _cli(*args: str) -> str:
    return f"import sys; sys.argv = ['bac', *{list(args)!r}]; from bac.cli import main; main()"


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    # This tree's code, as a checkout installed with pip would run it.
    env = {**os.environ, "PYTHONPATH": f"{site}:{ROOT / 'src'}", "BAC_API_KEY": "bac_x"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_the_sdk_and_the_cli_run_without_the_server(tmp_path: Path) -> None:
    sdk = _python("import bac, bac.cli; print(bac.Sandbox.__name__, bac.UnknownUserError)",
                  tmp_path)
    assert sdk.returncode == 0, sdk.stderr
    blocked = _python("import starlette", tmp_path)
    assert "blocked: SDK only" in blocked.stderr  # the blocker is really in place
    helped = _python(_cli("sandbox", "list", "--help"), tmp_path)
    assert helped.returncode == 0 and "Usage" in helped.stdout, helped.stderr
    served = _python(_cli("serve"), tmp_path)
    assert served.returncode == 1
    lines = served.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'bac[server]'" in lines[0], served.stderr
    mcp = _python(_cli("mcp"), tmp_path)  # the MCP SDK needs starlette: blocked here
    assert mcp.returncode == 1 and mcp.stdout == ""
    assert "bac mcp needs the mcp extra: pip install 'bac[mcp]'" in mcp.stderr, mcp.stderr
