"""The volume content API's file work (``control.volumes._content``) on a directory standing
for a volume, with every trick a sandbox could plant in it: no call ever reads, writes,
lists, changes or removes anything outside."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from bac_server.control import Conflict, InvalidRequest, NotFound, QuotaExceeded
from bac_server.control.volumes import VolumeContent, normalize
from bac_server.host import IdRange

pytestmark = pytest.mark.root
IDS = IdRange()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[VolumeContent, Path, Path]]:
    """(the content, the volume's directory, a host file beside it)."""
    root = tmp_path / "vol"
    root.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("host secret")
    (tmp_path / "outdir").mkdir()
    yield VolumeContent(root, IDS), root, outside


def test_paths_are_normalised_inside_the_top() -> None:
    """``..`` stops at the top; the result is always absolute."""
    assert normalize("a/../../b") == "/b"
    assert normalize("/../../..") == "/"
    assert normalize("//x//y/") == "/x/y"
    for bad in ("", "a\x00b", "x" * 5000):
        with pytest.raises(InvalidRequest):
            normalize(bad)


def test_planted_links_never_lead_out(world: tuple[VolumeContent, Path, Path]) -> None:
    """Links to /, to a host file, up through .., and a parent that is a link: reads and
    stats stay in the volume, writes replace the link or land inside."""
    content, root, outside = world
    os.symlink("/", root / "top")
    os.symlink(str(outside), root / "abs")
    os.symlink("../secret.txt", root / "up")
    os.symlink("../outdir", root / "updir")
    for path in ("/abs", "/up", f"/top{outside}", "/updir/x", "/../secret.txt"):
        with pytest.raises(NotFound):
            content.open_read(path)
    assert content.stat("/abs").type == "symlink"
    assert content.stat("/abs").target == str(outside)
    assert {e.name for e in content.listing("/top")} == {"top", "abs", "up", "updir"}
    upload = content.open_write("/up", uid=None, gid=None, mode=None)
    upload.write(b"replaced")
    assert upload.publish().type == "file"
    assert outside.read_text() == "host secret"
    # "../outdir" resolves to the volume's own /outdir: missing, so nothing is written...
    with pytest.raises(NotFound):
        content.open_write("/updir/new.txt", uid=None, gid=None, mode=None)
    (root / "outdir").mkdir()
    upload = content.open_write("/updir/new.txt", uid=None, gid=None, mode=None)
    upload.write(b"inside")
    upload.publish()
    # ... and once it exists, that is where the file goes.
    assert (root / "outdir" / "new.txt").read_text() == "inside"
    assert not (root.parent / "outdir" / "new.txt").exists()
    content.make_dir("/top/made", uid=None, gid=None, mode=None, force=True)
    assert (root / "made").is_dir() and not (Path("/") / "made").exists()
    os.chown(outside, 4242, 4242)
    content.update("/abs", uid=0, gid=0, mode=None)  # the link's owner, not its target's
    assert os.lstat(root / "abs").st_uid == IDS.root
    assert os.stat(outside).st_uid == 4242
    with pytest.raises(InvalidRequest):
        content.update("/abs", uid=None, gid=None, mode=0o777)
    content.remove("/top")
    assert Path("/etc/passwd").exists() and root.is_dir()
    content.remove("/abs")
    assert outside.exists()
    assert stat.S_IMODE(os.stat(outside).st_mode) != 0o777


def test_owners_modes_and_errors(world: tuple[VolumeContent, Path, Path]) -> None:
    """Owners are the sandboxes' ids, shifted into the host range; each failure is the
    control plane's error, never an OSError."""
    content, root, _ = world
    made = content.make_dir("/d", uid=None, gid=None, mode=0o750, force=False)
    assert (made.uid, made.gid, made.mode) == (1000, 1000, 0o750)
    assert os.stat(root / "d").st_uid == IDS.root + 1000
    with pytest.raises(Conflict):
        content.make_dir("/d", uid=None, gid=None, mode=None, force=False)
    assert content.make_dir("/d", uid=None, gid=None, mode=None, force=True).type == "directory"
    with pytest.raises(NotFound):
        content.make_dir("/x/y", uid=None, gid=None, mode=None, force=False)
    with pytest.raises(InvalidRequest):
        content.make_dir("/e", uid=70000, gid=None, mode=None, force=False)
    upload = content.open_write("/d/f", uid=0, gid=5, mode=0o600)
    upload.write(b"x")
    entry = upload.publish()
    assert (entry.uid, entry.gid, entry.mode, entry.size) == (0, 5, 0o600, 1)
    with pytest.raises(InvalidRequest):
        content.open_read("/d")
    with pytest.raises(InvalidRequest):
        content.open_write("/d", uid=None, gid=None, mode=None).publish()
    assert [e.name for e in content.listing("/d")] == ["f"]  # the partial is gone
    os.mkfifo(root / "fifo")
    with pytest.raises(InvalidRequest):
        content.open_read("/fifo")  # never blocks
    with pytest.raises(InvalidRequest):
        content.remove("/")
    with pytest.raises(InvalidRequest):
        content.listing("/", depth=0)
    os.chown(root / "d" / "f", 12345, 12345)  # an owner outside the sandboxes' range
    assert content.stat("/d/f").uid == 65534
    assert isinstance(QuotaExceeded("x"), Exception)
