"""Memory merging (``BAC_KSM``): with it on, the host's KSM runs and every process of a
sandbox, booted or restored from a start snapshot, has its memory marked mergeable (the
commands too, by inheritance); with it off (the default), none is."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bac_process import ServerProcess, running
from e2b import Sandbox

pytestmark = [pytest.mark.root, pytest.mark.slow]

KSM = Path("/sys/kernel/mm/ksm")
NO_POOL = {"BAC_POOL_SIZE": "0", "BAC_START_SNAPSHOT_POOL": "0", "BAC_POOL_MAX": "0"}

if not (KSM / "run").exists() or not Path("/proc/self/ksm_stat").exists():
    pytest.skip("this kernel has no KSM or no /proc/<pid>/ksm_stat", allow_module_level=True)


@pytest.fixture(scope="module")
def host_ksm() -> Iterator[None]:
    """The host's KSM settings as they were before (the server turns the scanner on)."""
    saved = {name: (KSM / name).read_text().strip() for name in ("run", "advisor_max_cpu")
             if (KSM / name).exists()}
    yield
    for name, value in saved.items():
        (KSM / name).write_text(value)


def _opts(server: ServerProcess) -> dict[str, Any]:
    return {"api_key": server.keys[0], "api_url": server.url, "sandbox_url": server.url}


def _merge_any(sbx: Sandbox) -> str:
    stat = sbx.commands.run("cat /proc/self/ksm_stat").stdout
    return stat.split("ksm_merge_any:")[1].split()[0]


def test_on_every_process_is_mergeable_booted_or_restored(host_ksm: None) -> None:
    with running("ksm", BAC_KSM="true", BAC_KSM_MAX_CPU_PCT="5", **NO_POOL) as server:
        server.create_key("ksm")
        with Sandbox.create(timeout=120, **_opts(server)) as booted:
            assert _merge_any(booted) == "yes"
            assert (KSM / "run").read_text().strip() == "1"
            if (KSM / "advisor_max_cpu").exists():
                assert (KSM / "advisor_max_cpu").read_text().strip() == "5"
            records = server.data_dir / "start-snapshots"
            _wait_complete(records)
            with Sandbox.create(timeout=120, **_opts(server)) as restored:
                assert _merge_any(restored) == "yes"


def test_off_by_default_nothing_is_mergeable() -> None:
    with running("no-ksm", **NO_POOL) as server:
        server.create_key("no-ksm")
        with Sandbox.create(timeout=120, **_opts(server)) as sbx:
            assert _merge_any(sbx) == "no"


def _wait_complete(records: Path, bound_s: float = 90) -> None:
    """The built-in's start snapshot, taken in the background after the first create."""
    deadline = time.monotonic() + bound_s
    while not any(json.loads(p.read_text())["complete"] for p in records.glob("*.json")):
        assert time.monotonic() < deadline, "no start snapshot was taken"
        time.sleep(0.2)
