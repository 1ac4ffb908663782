"""A record being written when the server died leaves its temporary file; the slot's
teardown removes such files (and nothing else: a link of that name stays, its target
untouched), so the slot's directory can go."""

from __future__ import annotations

from pathlib import Path

from bac_server.host import remove_partial_writes, write_private


def test_only_the_temporary_files_of_private_writes_go(tmp_path: Path) -> None:
    write_private(tmp_path / "state.json", "{}")
    (tmp_path / ".state.json.40fdc2e7.tmp").write_text("")  # a write cut short
    target = tmp_path / "elsewhere"
    target.write_text("kept")
    (tmp_path / ".link.tmp").symlink_to(target)
    (tmp_path / ".dir.tmp").mkdir()
    remove_partial_writes(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".dir.tmp", ".link.tmp", "elsewhere", "state.json"]
    assert target.read_text() == "kept"
    remove_partial_writes(tmp_path / "gone")  # a directory already removed: nothing to do
