"""Artefacts are durable: promoted, then the server killed with SIGKILL and started again
on the same data dir, they are listed and downloaded as they were, after their sandbox
ended; what a crash could leave (a partial copy, bytes no row names) is removed at start."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import secrets
from collections.abc import Iterator

import httpx
import pytest
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir

from bac import Artefacts, Sandbox

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess(fresh_data_dir("artefacts-restart"))
    srv.start()
    srv.create_key("artefacts")
    try:
        yield srv
    finally:
        with contextlib.suppress(httpx.TransportError):  # a failed test may leave it down
            srv.kill_all_sandboxes()
        srv.stop()
    remove_data_dir(srv)


def test_artefacts_survive_a_crash_and_the_start_sweeps_leftovers(
        server: ServerProcess) -> None:
    """After kill -9 and a restart the artefact is listed and downloaded as promoted; a
    planted partial copy and an unnamed blob are gone."""
    opts = {"api_url": server.url, "api_key": server.keys[0]}
    data = secrets.token_bytes(100_000)
    with Sandbox.create(timeout=120, **opts) as box:
        box.files.write("/home/user/kept.bin", data)
        made = box.artefacts.promote("/home/user/kept.bin", "kept.bin", run_id="durable")
    server.kill9()
    root = server.data_dir / "artefacts"
    (root / "partial" / "crashed.partial").write_bytes(b"half")
    unnamed = root / "blobs" / hashlib.sha256(b"unnamed").hexdigest()
    unnamed.write_bytes(b"unnamed")
    server.start()
    with Artefacts(**opts) as artefacts:
        assert artefacts.list("durable") == [dataclasses.replace(made, created=None)]
        assert artefacts.download("durable", "kept.bin") == data
    assert list((root / "partial").iterdir()) == []
    assert sorted(p.name for p in (root / "blobs").iterdir()) == [made.sha256]
