"""Slot records and checkpoint metadata carry the layer stack, and still read old files."""

from __future__ import annotations

import json
from pathlib import Path

from bac_server.backends.namespaces.checkpoint._stored import Stored
from bac_server.backends.namespaces.slots import SlotPhase, SlotRecord

_OLD_RECORD = {
    "slot": "s0123456789abcdef", "phase": "running", "template_id": "base",
    "template_rootfs": "/var/lib/bac/templates/base/x/rootfs", "envd_bundle": "/e",
    "lease_index": 3, "host_address": "10.202.0.6", "sandbox_address": "10.202.0.7",
    "veth": "bacs3", "cgroup_path": "/bac/s0123456789abcdef", "owner": "1:2", "vcpus": 2,
    "memory_mb": 512, "pids_max": 4096,
}


def test_old_slot_record_is_its_rootfs_alone() -> None:
    """A record written before layered templates stacks just its template rootfs."""
    record = SlotRecord.from_json(json.dumps(_OLD_RECORD))
    assert record.layer_stack == (Path("/var/lib/bac/templates/base/x/rootfs"),)
    assert record.upper_dir is None and record.work_dir is None


def test_layered_slot_record_round_trips() -> None:
    """A record with layers (and a build slot's upper and work dirs) reads back the same."""
    record = SlotRecord.from_json(json.dumps(_OLD_RECORD | {
        "layers": ["/l/two", "/l/one", "/r"], "phase": "building", "upper_dir": "/l/three",
        "work_dir": "/l/.three.work"}))
    again = SlotRecord.from_json(record.to_json())
    assert again.layer_stack == (Path("/l/two"), Path("/l/one"), Path("/r"))
    assert (again.phase, again.upper_dir, again.work_dir) == \
        (SlotPhase.BUILDING, "/l/three", "/l/.three.work")


def test_checkpoint_meta_old_and_layered(tmp_path: Path) -> None:
    """Checkpoint metadata without layers has no lowers; with layers, all but the last."""
    old = {"checkpoint_id": "c1", "sandbox_id": "s", "created_at": 1.0, "memory": False,
           "size_bytes": 10, "template_id": "base", "template_rootfs": "/r",
           "envd_bundle": "/e"}
    (tmp_path / "meta.json").write_text(json.dumps(old))
    assert Stored(tmp_path).meta().lowers == ()
    (tmp_path / "meta.json").write_text(json.dumps(old | {"layers": ["/b", "/a", "/r"]}))
    assert Stored(tmp_path).meta().lowers == (Path("/b"), Path("/a"))
