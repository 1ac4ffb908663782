"""A real Bac server for the docs' examples, and the environment a reader's shell has.

The server is ``bac serve`` on a free port with a fresh data dir and the machine's
prebuilt templates (tests/compat/bac_process.py). It stands in for the one ``scripts/up``
starts on http://localhost:3000: the blocks run with that address, and the file
``scripts/up`` keeps the API key in, replaced by the test server's (``Reader.rewrites``).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))

from bac_process import ServerProcess, running
from doc_session import Reader


@pytest.fixture(scope="module")
def docs_server() -> Iterator[ServerProcess]:
    """One server a test module: stopped, and checked to leave nothing, when it is done."""
    with running("docs") as server:
        yield server


@pytest.fixture
def reader(docs_server: ServerProcess, tmp_path: Path) -> Reader:
    """A new reader: a team of its own (no sandboxes or templates of another page's), an
    empty home to work in."""
    home = tmp_path / "home"
    home.mkdir()
    key = docs_server.create_key(f"reader-{uuid.uuid4().hex[:12]}")
    key_file = tmp_path / "first-api-key"
    key_file.write_text(key + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAC_", "E2B_"))}
    env.update(
        HOME=str(home),
        # The environment scripts/up made, first: bac, its python and the SDKs.
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        BAC_API_KEY=key,
        # The CLI's and SDK's default address, which this server stands in for.
        BAC_API_URL=docs_server.url,
    )
    rewrites = {
        "http://localhost:3000": docs_server.url,
        "http://127.0.0.1:3000": docs_server.url,
        "/var/lib/bac/first-api-key": str(key_file),
    }
    return Reader(home, env, rewrites)
