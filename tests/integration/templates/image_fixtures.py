"""Fixtures of the image import tests: test images, loopback registries, data dirs.

The main test image is a working root filesystem in two layers: dash and the C library
copied from the host (so ``chroot rootfs /bin/sh`` runs), files with several owners, a
setuid file, a hard link, a file capability and a device node (which the import must
drop), and in the second layer a whiteout and an opaque directory over the first.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from registry_fixture import Entry, Registry, build_image, running_registry, write_layer

from bac_server.host import IdRange, remove_tree
from bac_server.templates import ImageConfig, ImportedImage
from bac_server.templates._idshift import ROOTLESS_XATTR

# cap_net_raw+ep as a VFS_CAP_REVISION_2 xattr (what setcap writes).
CAP_NET_RAW = "\x01\x00\x00\x02\x00\x20\x00\x00" + "\x00" * 12
EXPECTED_ENV = (("PATH", "/bin"), ("GREETING", "hello world"))
EXPECTED_CMD = ("/bin/sh", "-c", "echo hi")
AUTH = ("alice", "s3cret-Pa55")


@dataclass(frozen=True)
class SampleImage:
    layout: Path
    tag: str
    manifest_digest: str
    layer_digests: tuple[str, ...]

    @property
    def oci_ref(self) -> str:
        return f"oci:{self.layout}:{self.tag}"


def _host_file(path: str) -> bytes:
    return Path(os.path.realpath(path)).read_bytes()


def _base_layer() -> list[Entry]:
    d = tarfile.DIRTYPE
    return [
        Entry("bin", d, mode=0o755), Entry("lib", d, mode=0o755),
        Entry("lib/x86_64-linux-gnu", d, mode=0o755), Entry("lib64", d, mode=0o755),
        Entry("bin/dash", data=_host_file("/bin/dash"), mode=0o755),
        Entry("bin/sh", tarfile.SYMTYPE, link="dash", mode=0o777),
        Entry("lib/x86_64-linux-gnu/libc.so.6",
              data=_host_file("/lib/x86_64-linux-gnu/libc.so.6"), mode=0o755),
        Entry("lib64/ld-linux-x86-64.so.2",
              data=_host_file("/lib64/ld-linux-x86-64.so.2"), mode=0o755),
        Entry("etc", d, mode=0o755), Entry("etc/keep", data=b"kept\n"),
        Entry("etc/gone", data=b"deleted by layer 2\n"),
        Entry("opq", d, mode=0o755), Entry("opq/old", data=b"hidden by layer 2\n"),
        Entry("home", d, mode=0o755), Entry("home/u", d, mode=0o750, uid=1000, gid=1000),
        Entry("home/u/notes", data=b"mine\n", uid=1000, gid=1000),
        Entry("nobody", data=b"n\n", uid=65534, gid=65534),
        Entry("usr", d, mode=0o755), Entry("usr/bin", d, mode=0o755),
        Entry("usr/bin/setuid-tool", data=b"#!/bin/sh\n", mode=0o4755),
        Entry("etc/keep-link", tarfile.LNKTYPE, link="etc/keep"),
        Entry("usr/bin/pinger", data=b"#!/bin/sh\n", mode=0o755,
              xattrs=(("security.capability", CAP_NET_RAW),)),
        Entry("dev", d, mode=0o755),
        Entry("dev/mem", tarfile.CHRTYPE, mode=0o666, device=(1, 1)),
    ]


def _upper_layer() -> list[Entry]:
    return [
        Entry("etc/.wh.gone"), Entry("opq/.wh..wh..opq"),
        Entry("opq/new", data=b"from layer 2\n"), Entry("etc/added", data=b"added\n"),
    ]


def _manifest(layout: Path, tag: str) -> tuple[str, tuple[str, ...]]:
    index = json.loads((layout / "index.json").read_text())
    entry = next(m for m in index["manifests"]
                 if m["annotations"]["org.opencontainers.image.ref.name"] == tag)
    blob = layout / "blobs" / "sha256" / entry["digest"].removeprefix("sha256:")
    layers = tuple(layer["digest"] for layer in json.loads(blob.read_text())["layers"])
    return entry["digest"], layers


def make_image(work: Path, layout: Path, tag: str, layers: list[list[Entry]], *,
               config: tuple[str, ...] = (), architecture: str | None = None) -> SampleImage:
    work.mkdir(parents=True, exist_ok=True)
    tars = [write_layer(work / f"{tag}-{i}.tar", entries) for i, entries in enumerate(layers)]
    build_image(layout, tag, tars, config=config, architecture=architecture)
    digest, layer_digests = _manifest(layout, tag)
    return SampleImage(layout, tag, digest, layer_digests)


@pytest.fixture(scope="session")
def session_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="bac-images-", dir="/var/tmp"))
    os.chmod(path, 0o700)
    yield path
    remove_tree(path)


@pytest.fixture(scope="session")
def images_dir(session_dir: Path) -> Path:
    """Where the test images live (an import directory for every test's data dir)."""
    return session_dir / "source-images"


@pytest.fixture(scope="session")
def test_image(session_dir: Path, images_dir: Path) -> SampleImage:
    return make_image(session_dir / "layers", images_dir / "main", "v1",
                      [_base_layer(), _upper_layer()],
                      config=("--config.env=PATH=/bin", "--config.env=GREETING=hello world",
                              "--config.user=1000:1000", "--config.workingdir=/home/u",
                              "--config.entrypoint=/bin/sh", "--config.entrypoint=-c",
                              "--config.cmd=echo hi"))


@pytest.fixture(scope="session")
def arm_image(session_dir: Path, images_dir: Path) -> SampleImage:
    return make_image(session_dir / "layers", images_dir / "arm", "v1",
                      [[Entry("arm-only", data=b"an arm64 layer\n")]], architecture="arm64")


@pytest.fixture(scope="session")
def registry(session_dir: Path) -> Iterator[Registry]:
    with running_registry(session_dir / "registry") as reg:
        yield reg


@pytest.fixture(scope="session")
def auth_registry(session_dir: Path) -> Iterator[Registry]:
    with running_registry(session_dir / "auth-registry", auth=AUTH) as reg:
        yield reg


_counter = itertools.count()


@pytest.fixture
def data_dir(session_dir: Path, images_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data dir (nothing cached) that may import from ``images_dir``."""
    monkeypatch.setenv("BAC_IMAGE_IMPORT_DIRS", str(images_dir))
    monkeypatch.delenv("BAC_REGISTRY_MIRROR", raising=False)
    path = session_dir / f"data-{next(_counter)}"
    path.mkdir(mode=0o700)
    return path


def check_test_image(image: ImportedImage, test_image: SampleImage,
                     digest: str | None = None) -> None:
    """The imported main test image is complete, layered, shifted and sanitized."""
    root, base = image.rootfs, IdRange().base
    assert image.digest == (digest or test_image.manifest_digest)
    assert image.config == ImageConfig(env=EXPECTED_ENV, user="1000:1000", workdir="/home/u",
                                       cmd=EXPECTED_CMD)
    assert (root / "etc/keep").read_text() == "kept\n"
    assert (root / "etc/added").read_text() == "added\n"
    assert not (root / "etc/gone").exists(), "a whiteout of layer 2 was not applied"
    assert sorted(p.name for p in (root / "opq").iterdir()) == ["new"], "opaque dir leaked"
    owners = {path: ((root / path).lstat().st_uid, (root / path).lstat().st_gid)
              for path in (".", "etc/keep", "home/u", "home/u/notes", "nobody", "bin/sh")}
    assert owners == {".": (base, base), "etc/keep": (base, base),
                      "home/u": (base + 1000, base + 1000),
                      "home/u/notes": (base + 1000, base + 1000),
                      "nobody": (base + 65534, base + 65534), "bin/sh": (base, base)}
    assert stat.S_IMODE((root / "usr/bin/setuid-tool").stat().st_mode) == 0o4755
    assert stat.S_IMODE(root.stat().st_mode) == 0o755
    assert (root / "etc/keep-link").stat().st_ino == (root / "etc/keep").stat().st_ino
    assert "security.capability" not in os.listxattr(root / "usr/bin/pinger")
    # Unpacked unprivileged, a device node of the image becomes an empty file, never a node.
    placeholder = (root / "dev/mem").lstat()
    assert stat.S_ISREG(placeholder.st_mode) and placeholder.st_size == 0, \
        "a device node of the image reached the rootfs"
    assert not any(stat.S_ISCHR(p.lstat().st_mode) or stat.S_ISBLK(p.lstat().st_mode)
                   for p in root.rglob("*"))
    assert not any(ROOTLESS_XATTR in os.listxattr(p, follow_symlinks=False)
                   for p in root.rglob("*") if not p.is_symlink()), "ownership record left"
    assert run_in(root, "/bin/sh", "-c", "read x < /etc/keep; echo $x") == "kept\n"
    meta = json.loads((root.parent / "image.json").read_text())
    assert (meta["digest"], meta["id_base"]) == (image.digest, base)


def run_in(root: Path, *argv: str) -> str:
    """Run ``argv`` chrooted into ``root`` (as host root); its stdout, or fail."""
    ran = subprocess.run(["chroot", str(root), *argv], capture_output=True, text=True,
                         check=False)
    assert ran.returncode == 0, f"{argv} in {root}: exit {ran.returncode}: {ran.stderr}"
    return ran.stdout


def leftovers(data_dir: Path) -> list[str]:
    """Scratch directories and unpublished entries an import left behind."""
    root = data_dir / "images"
    found = [str(p) for p in (root / ".tmp").iterdir()] if (root / ".tmp").is_dir() else []
    found += [str(p) for p in root.glob("sha256-*") if not (p / "image.json").is_file()]
    return found


def tool_children() -> list[str]:
    """skopeo/umoci processes that are children of this test process."""
    found = []
    for proc_stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = proc_stat.read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2:].split()[1])
        if ppid == os.getpid() and comm in ("skopeo", "umoci"):
            found.append(f"{proc_stat.parent.name} {comm}")
    return found
