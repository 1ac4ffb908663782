"""Looking paths up through step layers on the host agrees with what overlayfs shows."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from bac_server.backends.namespaces import EnvdBundleError
from bac_server.backends.namespaces.envd import template_python
from bac_server.backends.namespaces.layers import find_in_layers, mount_overlay
from bac_server.host import remove_tree
from bac_server.host._syscalls import umount

pytestmark = [pytest.mark.root]


def _file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _whiteout(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, stat.S_IFCHR, os.makedev(0, 0))


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Path, ...]]:
    """Three layers, topmost first, with every kind of hiding overlayfs knows."""
    top, middle, bottom = tmp_path / "top", tmp_path / "middle", tmp_path / "bottom"
    for layer in (top, middle, bottom):
        layer.mkdir()
    _file(bottom / "etc/kept", "bottom")
    _file(bottom / "etc/overridden", "bottom")
    _file(middle / "etc/overridden", "middle")
    _file(bottom / "etc/deleted", "bottom")
    _whiteout(middle / "etc/deleted")
    _file(bottom / "opt/app/old", "bottom")
    _file(middle / "opt/app/new", "middle")
    os.setxattr(middle / "opt/app", "trusted.overlay.opaque", b"y")
    _file(bottom / "srv/dir/inner", "bottom")
    _file(top / "srv/dir", "a file replacing a directory")
    _file(bottom / "var/gone/inner", "bottom")
    _whiteout(top / "var/gone")
    yield top, middle, bottom
    remove_tree(tmp_path)


CASES = {"etc/kept": "bottom", "etc/overridden": "middle", "etc/deleted": None,
         "opt/app/new": "middle", "opt/app/old": None, "srv/dir/inner": None,
         "var/gone/inner": None, "etc/never": None}


def test_lookup_follows_overlay_rules(stack: tuple[Path, ...]) -> None:
    """The topmost layer wins; whiteouts, opaque directories and files over directories
    hide what is below."""
    for relative, expected in CASES.items():
        found = find_in_layers(stack, relative)
        assert (found.read_text() if found else None) == expected, relative


def test_lookup_agrees_with_a_real_overlay(stack: tuple[Path, ...], tmp_path: Path) -> None:
    """Every case reads the same through a mounted overlay of the same layers."""
    merged, upper, work = tmp_path / "merged", tmp_path / "upper", tmp_path / "work"
    for directory in (merged, upper, work):
        directory.mkdir()
    mount_overlay(merged, stack, upper, work)
    try:
        for relative, expected in CASES.items():
            path = merged / relative
            assert (path.read_text() if path.exists() else None) == expected, relative
    finally:
        umount(str(merged))


def test_template_python_is_found_through_layers(tmp_path: Path) -> None:
    """The envd bundle's Python is the topmost layer's /usr/bin/python3; a whiteout over
    it in a higher layer falls back to no interpreter link."""
    bottom, top = tmp_path / "bottom", tmp_path / "top"
    (bottom / "usr/bin").mkdir(parents=True)
    (bottom / "usr/bin/python3").symlink_to("python3.11")
    (top / "usr/bin").mkdir(parents=True)
    assert template_python((top, bottom)) == "3.11"
    (top / "usr/bin/python3").symlink_to("python3.12")
    assert template_python((top, bottom)) == "3.12"
    (top / "usr/bin/python3").unlink()
    _whiteout(top / "usr/bin/python3")
    with pytest.raises(EnvdBundleError, match="cannot tell the Python version"):
        template_python((top, bottom))
