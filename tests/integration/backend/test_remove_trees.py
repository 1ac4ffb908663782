"""Removing a slot's trees never deletes through what is mounted inside them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bac_server.host import mounts_under, remove_trees
from bac_server.host._syscalls import MS_BIND, mount

pytestmark = [pytest.mark.root]


def test_trees_are_removed_after_their_mounts_and_nothing_through_them(
        tmp_path: Path) -> None:
    """Binds of an outside directory (one of them under a tmpfs mounted in a tree) are
    detached, deepest first, before the trees go; the outside directory keeps its file."""
    victim = tmp_path / "outside"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    first, second = tmp_path / "slot" / "layer", tmp_path / "slot" / "etc"
    (first / "bind").mkdir(parents=True)
    (second / "tmp").mkdir(parents=True)
    mount(str(victim), str(first / "bind"), None, MS_BIND, None)
    mount("tmpfs", str(second / "tmp"), "tmpfs", 0, None)
    (second / "tmp" / "bind").mkdir()
    mount(str(victim), str(second / "tmp" / "bind"), None, MS_BIND, None)
    assert len(mounts_under(tmp_path / "slot")) == 3

    remove_trees([first, second, tmp_path / "slot" / "never-made"])

    assert not first.exists() and not second.exists()
    assert mounts_under(tmp_path) == []
    assert (victim / "keep").read_text() == "mine"
