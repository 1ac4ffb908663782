"""FROM an OCI image on disk (layout, oci-archive, docker-archive) and bad references."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_fixtures import (
    SampleImage,
    arm_image,
    check_test_image,
    data_dir,
    images_dir,
    leftovers,
    make_image,
    session_dir,
    test_image,
)
from registry_fixture import Entry

from bac_server.host import IdRange
from bac_server.templates import (
    FromImage,
    ImageError,
    ImageErrorKind,
    ImportedImage,
    materialize_image,
)
from bac_server.templates.images._refs import (
    DebianSuite,
    LocalImage,
    RegistryImage,
    parse_image_ref,
)

pytestmark = pytest.mark.root

DIGEST = "sha256:" + "a" * 64

__all__ = ["arm_image", "data_dir", "images_dir", "session_dir", "test_image"]


async def load(ref: str, data_dir: Path) -> ImportedImage:
    return await materialize_image(FromImage(ref), data_dir=data_dir, id_range=IdRange(),
                                   progress=lambda _line: None)


async def refused(ref: str, data_dir: Path, kind: ImageErrorKind) -> str:
    with pytest.raises(ImageError) as caught:
        await load(ref, data_dir)
    assert caught.value.kind is kind, caught.value
    assert leftovers(data_dir) == []
    return str(caught.value)


def skopeo_copy(source: str, dest: str) -> None:
    subprocess.run(["skopeo", "copy", "-q", source, dest], check=True, capture_output=True)


async def test_oci_layout(test_image: SampleImage, data_dir: Path) -> None:
    """An OCI layout on disk imports whole, with its manifest digest as identity; a second
    materialize is served from the cache."""
    image = await load(test_image.oci_ref, data_dir)
    check_test_image(image, test_image)
    assert await load(test_image.oci_ref, data_dir) == image


async def test_oci_archive(test_image: SampleImage, images_dir: Path, data_dir: Path) -> None:
    """An oci-archive (tar of a layout) imports to the same digest and content."""
    archive = images_dir / "main.oci.tar"
    if not archive.exists():
        skopeo_copy(test_image.oci_ref, f"oci-archive:{archive}:v1")
    check_test_image(await load(f"oci-archive:{archive}", data_dir), test_image)


async def test_docker_archive(test_image: SampleImage, images_dir: Path,
                              data_dir: Path) -> None:
    """A docker-archive (``docker save`` format) imports with the same files and config;
    its identity is the digest of the manifest the archive describes."""
    archive = images_dir / "main.docker.tar"
    if not archive.exists():
        skopeo_copy(test_image.oci_ref, f"docker-archive:{archive}:team/app:1")
    image = await load(f"docker-archive:{archive}", data_dir)
    assert image.digest != test_image.manifest_digest  # Docker's manifest format differs
    check_test_image(image, test_image, image.digest)
    assert await load(f"docker-archive:{archive}", data_dir) == image


def exited_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


async def test_crashed_import_is_cleaned_up(test_image: SampleImage, data_dir: Path) -> None:
    """The scratch directory of an import whose process died is removed by the next import;
    one of a live process is left alone."""
    scratch = data_dir / "images" / ".tmp"
    scratch.mkdir(parents=True)
    (scratch / f"{exited_pid()}-deadbeef" / "layout").mkdir(parents=True)
    (scratch / "1-alive").mkdir()  # pid 1 never goes away
    await load(test_image.oci_ref, data_dir)
    assert sorted(p.name for p in scratch.iterdir()) == ["1-alive"]
    (scratch / "1-alive").rmdir()


async def test_relative_path_is_under_imports(test_image: SampleImage, data_dir: Path) -> None:
    """A relative path names a file in <data_dir>/imports, where operators put images."""
    shutil.copytree(test_image.layout, data_dir / "imports" / "copied")
    image = await load(f"oci:copied:{test_image.tag}", data_dir)
    assert image.digest == test_image.manifest_digest


async def test_paths_outside_import_dirs_are_refused(data_dir: Path) -> None:
    """A local path outside the import directories (directly, by '..' or by a symlink)
    is refused before anything reads it: a build cannot import host files."""
    (data_dir / "imports").mkdir()
    os.symlink("/etc", data_dir / "imports" / "etc-link")
    for ref in ("oci:/etc", "oci-archive:../../../../etc/passwd", "oci:etc-link",
                f"oci:{data_dir}"):
        message = await refused(ref, data_dir, ImageErrorKind.FORBIDDEN)
        assert "outside the directories" in message


async def test_not_an_image(images_dir: Path, data_dir: Path) -> None:
    """A directory that is no OCI layout, a file that is no archive, a missing file and an
    unknown tag each fail with their own clear error."""
    (images_dir / "empty-dir").mkdir(exist_ok=True)
    (images_dir / "not-a-tar").write_text("hello\n")
    await refused(f"oci:{images_dir / 'empty-dir'}", data_dir, ImageErrorKind.NOT_AN_IMAGE)
    for transport in ("oci-archive", "docker-archive"):
        await refused(f"{transport}:{images_dir / 'not-a-tar'}", data_dir,
                      ImageErrorKind.NOT_AN_IMAGE)
    await refused(f"oci-archive:{images_dir / 'missing.tar'}", data_dir,
                  ImageErrorKind.NOT_FOUND)
    await refused(f"oci:{images_dir / 'main'}:no-such-tag", data_dir, ImageErrorKind.NOT_FOUND)


async def test_wrong_architecture(arm_image: SampleImage, data_dir: Path) -> None:
    """A local arm64 image is refused, saying which platform it is for."""
    message = await refused(arm_image.oci_ref, data_dir, ImageErrorKind.ARCHITECTURE)
    assert "linux/arm64" in message


async def test_owner_outside_id_range(session_dir: Path, images_dir: Path,
                                      data_dir: Path) -> None:
    """A file owned by a uid the sandbox cannot map (>= 65536) fails the import cleanly."""
    image = make_image(session_dir / "layers", images_dir / "big-uid", "v1",
                       [[Entry("far-away", data=b"x", uid=70000, gid=70000)]])
    message = await refused(image.oci_ref, data_dir, ImageErrorKind.FAILED)
    assert "far-away" in message and "outside the mapped range" in message


@pytest.mark.parametrize(("ref", "parsed"), [
    ("debian:bookworm", DebianSuite("bookworm", slim=False)),
    ("debian:12-slim", DebianSuite("bookworm", slim=True)),
    ("python", RegistryImage("docker.io", "library/python", None, None)),
    ("docker.io/team/app:1", RegistryImage("docker.io", "team/app", "1", None)),
    ("localhost:5000/a/b", RegistryImage("localhost:5000", "a/b", None, None)),
    (f"[::1]:5000/a@{DIGEST}", RegistryImage("[::1]:5000", "a", None, DIGEST)),
    ("ghcr.io/x/y:1.2", RegistryImage("ghcr.io", "x/y", "1.2", None)),
    ("oci:dir", LocalImage("oci", "dir", None)),
    ("oci-archive:/x.tar:t", LocalImage("oci-archive", "/x.tar", "t")),
    ("docker-archive:d.tar:a/b:1", LocalImage("docker-archive", "d.tar", "a/b:1"))])
def test_reference_forms(ref: str, parsed: object) -> None:
    """Each accepted reference form parses to the source it names (Docker's naming rules)."""
    assert parse_image_ref(ref) == parsed


@pytest.mark.parametrize(("ref", "kind"), [
    ("", ImageErrorKind.SYNTAX), ("Team/App:1", ImageErrorKind.SYNTAX),
    ("127.0.0.1:5000/bad repo", ImageErrorKind.SYNTAX),
    ("team/app@sha256:1234", ImageErrorKind.SYNTAX), ("team/app:bad/tag", ImageErrorKind.SYNTAX),
    ("debian:", ImageErrorKind.SYNTAX), ("debian:Bookworm", ImageErrorKind.SYNTAX),
    ("oci:", ImageErrorKind.SYNTAX), ("debian:sid", ImageErrorKind.NOT_FOUND)])
async def test_bad_references(ref: str, kind: ImageErrorKind, data_dir: Path) -> None:
    """Malformed references are refused with the accepted forms in the message."""
    message = await refused(ref, data_dir, kind)
    if kind is ImageErrorKind.SYNTAX:
        assert "unknown image reference" in message


@pytest.fixture
def tiny_data_dir(data_dir: Path) -> Iterator[Path]:
    """A data dir on a 600 KiB tmpfs: too small for the test image."""
    small = data_dir / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k,mode=0700", "tmpfs", str(small)],
                   check=True)
    yield small
    subprocess.run(["umount", str(small)], check=True)


async def test_disk_full(test_image: SampleImage, tiny_data_dir: Path) -> None:
    """Running out of space mid-import is reported as 'disk full' and leaves nothing."""
    message = await refused(test_image.oci_ref, tiny_data_dir, ImageErrorKind.DISK_FULL)
    assert "disk full" in message
    assert not list((tiny_data_dir / "images").glob("sha256-*"))
