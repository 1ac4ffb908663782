"""Through a real server and the official SDK: a sandbox that fills its disk gets ENOSPC
inside, a ``disk_full`` error event in its trace, and metrics read from its disk."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bac_process import ServerProcess
from e2b import CommandExitException, Sandbox

pytestmark = pytest.mark.root

BOUND_S = 20.0


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers={"X-API-KEY": server.keys[0]},
                      timeout=BOUND_S) as client:
        yield client


def _first(api: httpx.Client, sandbox_id: str, kind: str) -> dict[str, Any]:
    """The sandbox's first event of ``kind``, read from its live trace."""
    params = {"follow": "true", "kind": kind}
    with api.stream("GET", f"/sandboxes/{sandbox_id}/trace", params=params) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line:
                found: dict[str, Any] = json.loads(line)
                return found
    raise AssertionError(f"the trace ended without a {kind} event")


def test_a_full_disk_is_enospc_inside_and_an_error_event(api: httpx.Client,
                                                        slot_dir: Callable[[str], Path]
                                                        ) -> None:
    """fallocate past the sandbox's disk (the default 10 GiB, allocated without writing)
    fails with ENOSPC, the trace gets one disk_full event, the metrics show the disk
    used to its size, and the host holds no more than what was written."""
    sbx = Sandbox.create(timeout=120)
    try:
        with pytest.raises(CommandExitException) as failed:
            sbx.commands.run("fallocate -l 20G /home/user/big")
        assert "No space left on device" in failed.value.stderr
        full = _first(api, sbx.sandbox_id, "disk_full")
        assert full["level"] == "error"
        assert full["fields"]["disk_mb"] == "10240"
        assert int(full["fields"]["used_bytes"]) > 9 * 1024 ** 3
        metrics = api.get(f"/sandboxes/{sbx.sandbox_id}/metrics").json()
        last = metrics[-1]
        assert last["diskUsed"] > 0.95 * last["diskTotal"]
        assert last["diskTotal"] <= 10240 * 1024 * 1024
        image = slot_dir(sbx.sandbox_id) / "disk.img"
        assert image.stat().st_blocks * 512 < 512 * 1024 * 1024  # allocated, not written
        sbx.commands.run("rm /home/user/big && echo room > /home/user/room")
    finally:
        sbx.kill()
