"""Linking envd bundles between data dirs: real files and hard links in a temp dir."""

from __future__ import annotations

import os
from pathlib import Path

from bac_server.backends.namespaces.envd._bundle_cache import publish, seed


def _bundle(root: Path) -> Path:
    (root / "lib" / "pkg").mkdir(parents=True)
    (root / "lib" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "guest").mkdir()
    (root / "guest" / "mod.py").write_text("")
    (root / "lib" / "link").symlink_to("pkg")
    for path in (root, *root.rglob("*")):
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def _empty(path: Path) -> Path:
    path.mkdir(mode=0o755)
    return path


def test_a_seeded_bundle_shares_the_files_of_its_source(tmp_path: Path) -> None:
    """Seeding links every file (same inode), keeps symlinks, and owns its directories."""
    source = _bundle(_empty(tmp_path / "shared") / "abc")
    work = _empty(tmp_path / "work")
    assert seed(source, work)
    linked = work / "lib" / "pkg" / "__init__.py"
    assert linked.stat().st_ino == (source / "lib" / "pkg" / "__init__.py").stat().st_ino
    assert (work / "lib" / "link").readlink() == Path("pkg")
    assert (work / "guest").stat().st_ino != (source / "guest").stat().st_ino


def test_a_seed_anyone_else_could_write_is_not_used(tmp_path: Path) -> None:
    """One group- or world-writable file or directory in the seed: nothing is linked."""
    for victim in ("lib/pkg/__init__.py", "guest"):
        source = _bundle(_empty(tmp_path / f"shared-{victim.count('/')}") / "abc")
        (source / victim).chmod(0o777 if (source / victim).is_dir() else 0o666)
        work = _empty(tmp_path / f"work-{victim.count('/')}")
        assert not seed(source, work)
        assert list(work.iterdir()) == []


def test_no_seed_when_the_shared_dir_has_no_such_bundle(tmp_path: Path) -> None:
    """A missing (or half-made, no lib/) bundle is simply not there."""
    shared = _empty(tmp_path / "shared")
    _empty(shared / "half")
    assert not seed(shared / "missing", _empty(tmp_path / "w1"))
    assert not seed(shared / "half", _empty(tmp_path / "w2"))


def test_a_built_bundle_is_published_once_and_seeds_the_next(tmp_path: Path) -> None:
    """publish links a bundle into the shared dir; a second publish leaves the first."""
    built = _bundle(_empty(tmp_path / "mine") / "abc")
    shared = _empty(tmp_path / "shared")
    publish(built, shared)
    first = (shared / "abc" / "lib" / "pkg" / "__init__.py").stat().st_ino
    assert first == (built / "lib" / "pkg" / "__init__.py").stat().st_ino
    other = _bundle(_empty(tmp_path / "other") / "abc")
    publish(other, shared)
    assert (shared / "abc" / "lib" / "pkg" / "__init__.py").stat().st_ino == first
    assert not [p for p in shared.iterdir() if p.name.startswith(".publish-")]
    assert seed(shared / "abc", _empty(tmp_path / "next"))


def test_nothing_is_published_into_a_missing_or_shared_writable_dir(tmp_path: Path) -> None:
    """No shared dir, or one others may write: the bundle stays ours only."""
    built = _bundle(_empty(tmp_path / "mine") / "abc")
    publish(built, tmp_path / "absent")
    assert not (tmp_path / "absent").exists()
    open_dir = _empty(tmp_path / "open")
    open_dir.chmod(0o777)
    publish(built, open_dir)
    assert os.listdir(open_dir) == []
