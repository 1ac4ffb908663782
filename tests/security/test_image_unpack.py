"""A FROM image's layers (the tenant's choice of image) are applied by umoci as sandbox
root's host uid, not host root: whatever a layer names, what the unpacking writes is
that uid's, and links and hard links in a layer never reach a host file."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "templates"))

from host_snapshot import make_victims, snapshot
from registry_fixture import Entry, build_image, write_layer

from bac_server.host import IdRange
from bac_server.templates import ImageError
from bac_server.templates._idshift import ROOTLESS_XATTR, recorded_ids, shift_recorded_ownership
from bac_server.templates.images._oci import LAYOUT_TAG, unpack

pytestmark = pytest.mark.root
IDS = IdRange()


def _image(tmp: Path, entries: list[Entry]) -> Path:
    layout = tmp / "layout"
    build_image(layout, LAYOUT_TAG, [write_layer(tmp / "layer.tar", entries)])
    return layout


async def test_layers_are_applied_by_sandbox_root_then_shifted(tmp_path: Path) -> None:
    """Right after umoci every inode is owned by sandbox root's host uid, the image's own
    owners only recorded; the shift then gives each its owner in the sandbox range, keeps
    setuid and leaves no record."""
    d = b"5"
    layout = _image(tmp_path, [
        Entry("etc", d, mode=0o755), Entry("etc/shadow", data=b"root:*:\n", mode=0o600),
        Entry("home", d, mode=0o755), Entry("home/u", d, mode=0o700, uid=1000, gid=1000),
        Entry("home/u/notes", data=b"mine\n", uid=1000, gid=1000),
        Entry("mixed", data=b"m\n", uid=0, gid=1000),
        Entry("sudo", data=b"#!/bin/sh\n", mode=0o4755)])
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    rootfs = out / "rootfs"
    await unpack(layout, rootfs, IDS.root, lambda _line: None, "test image")
    paths = [rootfs, *rootfs.rglob("*")]
    assert {(p.lstat().st_uid, p.lstat().st_gid) for p in paths} == {(IDS.root, IDS.root)}
    recorded = {p.relative_to(rootfs).as_posix(): recorded_ids(
        os.getxattr(p, ROOTLESS_XATTR)) for p in paths
        if ROOTLESS_XATTR in os.listxattr(p)}
    assert recorded == {"home/u": (1000, 1000), "home/u/notes": (1000, 1000),
                        "mixed": (0, 1000)}
    assert sorted(os.listdir(out)) == ["rootfs"]  # umoci's work directory is gone

    shift_recorded_ownership(rootfs, IDS.root, IDS.base, IDS.size)
    owners = {p.relative_to(rootfs).as_posix(): (p.lstat().st_uid - IDS.base,
                                                 p.lstat().st_gid - IDS.base)
              for p in rootfs.rglob("*")}
    assert owners == {"etc": (0, 0), "etc/shadow": (0, 0), "home": (0, 0),
                      "home/u": (1000, 1000), "home/u/notes": (1000, 1000),
                      "mixed": (0, 1000), "sudo": (0, 0)}
    assert stat.S_IMODE((rootfs / "sudo").stat().st_mode) == 0o4755
    assert stat.S_IMODE((rootfs / "etc/shadow").stat().st_mode) == 0o600
    assert not any(ROOTLESS_XATTR in os.listxattr(p) for p in rootfs.rglob("*"))


async def test_a_layer_reaches_no_host_file_through_its_links(tmp_path: Path) -> None:
    """A layer linking to a root-owned host directory and file (symbolic and hard links,
    absolute and by '..'), then writing through the links: the host directory and its
    0600 file are unchanged, nothing new is there."""
    top = tmp_path / "host"
    top.mkdir()
    outside, secret = make_victims(top)
    up = "../" * 20
    layout = _image(tmp_path, [
        Entry("abs", b"2", link=str(outside)), Entry("abs/planted", data=b"x\n"),
        Entry("abs/secret", data=b"overwritten\n"),
        Entry("rel", b"2", link=f"{up}{str(outside).lstrip('/')}"),
        Entry("rel/planted-rel", data=b"x\n"),
        Entry("hard", b"1", link=f"{up}{str(secret).lstrip('/')}"),
        Entry("hard-abs", b"1", link=str(secret))])
    before = snapshot(top)
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    try:
        await unpack(layout, out / "rootfs", IDS.root, lambda _line: None, "test image")
    except ImageError:
        pass  # refusing the layer is as good as confining it
    assert snapshot(top) == before
    assert sorted(os.listdir(outside)) == ["secret"]


def test_ownership_records_parse_strictly() -> None:
    """The rootlesscontainers record: uid field 1, gid field 2, absent means 0; anything
    else is refused rather than guessed."""
    assert recorded_ids(b"") == (0, 0)
    assert recorded_ids(b"\x08\xe8\x07\x10\xe8\x07") == (1000, 1000)
    assert recorded_ids(b"\x10\xfe\xff\x03") == (0, 65534)
    assert recorded_ids(b"\x08\xff\xff\xff\xff\x0f\x10\x01") == (0, 1)  # uid "unchanged"
    for bad in (b"\x18\x01", b"\x08", b"\x08\xff\xff\xff\xff\xff\xff", b"\x0a\x01\x00",
                b"\x08\x80\x80\x80\x80\x10"):
        with pytest.raises(ValueError):
            recorded_ids(bad)


async def test_unpacking_as_host_root_is_refused(tmp_path: Path) -> None:
    """The unpacker is never given uid 0."""
    with pytest.raises(ValueError, match="never unpacked as uid 0"):
        await unpack(tmp_path / "layout", tmp_path / "rootfs", 0, lambda _line: None, "x")
