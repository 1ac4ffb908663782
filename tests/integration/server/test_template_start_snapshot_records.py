"""Start snapshot records on a real filesystem (no server needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bac_server.control.templates import SnapshotRecords, StartSnapshot


def _snapshot(template_id: str = "t1", digest: str = "d" * 32) -> StartSnapshot:
    return StartSnapshot(template_id=template_id, digest=digest, checkpoint_id="c0123",
                         token="secret", size_bytes=42, created_at=1.0, complete=True)


def test_records_round_trip_privately(tmp_path: Path) -> None:
    """A written record is read back equal, in a 0700 directory as a 0600 file, with no
    temporary file left; removing it twice is fine."""
    records = SnapshotRecords(tmp_path / "start-snapshots")
    records.write(_snapshot())
    assert records.load() == [_snapshot()]
    [path] = list(records.root.iterdir())
    assert (records.root.stat().st_mode & 0o777, path.stat().st_mode & 0o777) == (0o700, 0o600)
    records.remove("t1", "d" * 32)
    records.remove("t1", "d" * 32)
    assert records.load() == []


def test_a_rewrite_replaces_the_pending_record(tmp_path: Path) -> None:
    """The complete record replaces the pending one written before the checkpoint."""
    records = SnapshotRecords(tmp_path)
    records.write(StartSnapshot("t1", "d" * 32, "c0123", "secret"))
    records.write(_snapshot())
    assert records.load() == [_snapshot()]


@pytest.mark.parametrize("template_id, digest", [("../x", "d"), ("t1", "a/b"), ("T1", "d"),
                                                 ("", "d"), ("t1", "x" * 65)])
def test_names_that_could_leave_the_directory_are_refused(tmp_path: Path, template_id: str,
                                                          digest: str) -> None:
    """Only [a-z0-9] ids and digests become file names."""
    with pytest.raises(ValueError, match="not a template id and digest"):
        SnapshotRecords(tmp_path).write(_snapshot(template_id, digest))
    assert list(tmp_path.iterdir()) == []


def test_damaged_records_are_skipped_not_fatal(tmp_path: Path) -> None:
    """Truncated JSON, unknown fields and a file renamed to another key are skipped; the
    good record is still found."""
    records = SnapshotRecords(tmp_path)
    records.write(_snapshot())
    (tmp_path / "t2.aaaa.json").write_text("{")
    (tmp_path / "t3.bbbb.json").write_text(json.dumps({"surprise": 1}))
    moved = json.loads((tmp_path / f"t1.{'d' * 32}.json").read_text())
    (tmp_path / "t4.cccc.json").write_text(json.dumps(moved))
    assert records.load() == [_snapshot()]
