"""A COPY step's upload (a tenant's tar) cannot make the host write outside the tree it is
unpacked into: the CVE-2025-4517 shape (links nested past PATH_MAX, so a lexical check
and the kernel disagree), a fuzz of adversarial archives, and the same attack through a
real server's build API. Each test fails if anything outside the target changed."""

from __future__ import annotations

import asyncio
import io
import os
import posixpath
import re
import secrets
import shutil
import stat
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "server"))

import httpx
from bac_process import ServerProcess, running
from host_snapshot import Snapshot, make_victims, snapshot
from openapi_check import check
from template_api_client import TPL, request_build, start, wait

from bac_server.host import IdRange
from bac_server.templates import DiskFullError, TemplateBuildError
from bac_server.templates.build._copy import unpack

pytestmark = pytest.mark.root
SANDBOX_ROOT = IdRange().root
# Each fuzz example starts the real unprivileged unpacker (~0.2 s): about 13 s by default,
# BAC_FUZZ_EXAMPLES=5000 for a long run.
FUZZ_EXAMPLES = int(os.environ.get("BAC_FUZZ_EXAMPLES", "60"))

@dataclass
class Host:
    """A private directory standing for the host: the tree to unpack into, and beside it
    a root-owned 0755 directory holding a root-owned 0600 file."""

    top: Path
    target: Path
    outside: Path
    secret: Path

    @classmethod
    def make(cls, top: Path) -> Host:
        outside, secret = make_victims(top)
        (top / "scratch").mkdir(mode=0o700)
        return cls(top, top / "scratch" / "context", outside, secret)

    def untouched(self) -> Snapshot:
        return snapshot(self.top, skip=self.target)


def _add(tar: tarfile.TarFile, name: str, kind: bytes = tarfile.REGTYPE, *,
         data: bytes = b"", link: str = "", mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def cve_2025_4517_archive(target: Path, victim_dir: Path, victim_file: Path) -> bytes:
    """An upload that tarfile's ``data`` filter passes on Python < 3.11.13 and that writes
    outside ``target`` when extracted there: sixteen directories with 247-character
    names, each with a one-letter link to it, so that going through the letters reaches a
    depth past PATH_MAX; a link at that depth to the top (os.path.realpath gives up on it
    and goes on lexically, the kernel follows it); a link 'escape' that goes up from there
    to ``/`` and down to ``victim_dir`` (lexically it stays inside); then a new file and
    ``victim_file`` written through 'escape'."""
    letters = "abcdefghijklmnop"
    long_dir = "d" * 247
    levels_up = len(letters) + 1
    assert len(target.parts) - 1 <= levels_up, "the escape reaches / from at most this deep"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        path = ""
        for letter in letters:
            _add(tar, posixpath.join(path, long_dir), tarfile.DIRTYPE, mode=0o755)
            _add(tar, posixpath.join(path, letter), tarfile.SYMTYPE, link=long_dir)
            path = posixpath.join(path, long_dir)
        deep_link = "/".join(letters) + "/" + "l" * 254
        _add(tar, deep_link, tarfile.SYMTYPE, link="../" * len(letters))
        _add(tar, "escape", tarfile.SYMTYPE,
             link=deep_link + "/.." * levels_up + str(victim_dir))
        _add(tar, "escape/planted", data=b"written by a build\n")
        _add(tar, f"escape/{victim_file.name}", data=b"overwritten by a build\n")
    return buffer.getvalue()


async def _attempt(archive: Path, host: Host, src: str = ".") -> BaseException | None:
    try:
        await unpack(archive, host.target, SANDBOX_ROOT, src)
    except Exception as exc:  # the old unpacker failed with an OSError, after writing
        return exc
    return None


async def test_cve_2025_4517_archive_writes_nothing_outside(tmp_path: Path) -> None:
    """The nested-links-past-PATH_MAX upload leaves the directory and the 0600 file beside
    the target exactly as they were (content, mode, owner, no new file) and fails the
    COPY saying which entry was refused and why."""
    host = Host.make(tmp_path)
    archive = tmp_path / "upload.tar"
    archive.write_bytes(cve_2025_4517_archive(host.target, host.outside, host.secret))
    before = host.untouched()
    error = await _attempt(archive, host)
    assert host.untouched() == before
    assert sorted(os.listdir(host.outside)) == ["secret"]
    assert host.secret.read_text() == "root's secret\n"
    assert isinstance(error, TemplateBuildError), error
    message = str(error)
    assert message.startswith("COPY .: the uploaded files were refused: ")
    assert "passes through a symbolic link" in message


def test_no_archive_is_extracted_by_python_anywhere_in_the_code() -> None:
    """tarfile (or zipfile, shutil) extraction trusts a lexical check where the kernel
    resolves for real, so none may be used: tarfile stays a stream parser, run only by
    the unprivileged, bounded unpacker (what makes a vulnerable Python's tarfile
    acceptable, see docs/security.md)."""
    source = Path(__file__).resolve().parents[2] / "src"
    calls = re.compile(r"\.extractall\(|\.extract\(|unpack_archive\(|_extract_member\(")
    found = [f"{path.relative_to(source)}:{number}: {line.strip()}"
             for path in sorted(source.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if calls.search(line)]
    assert found == []
    assert any(source.rglob("context/_unpack.py")), "the scan looked in the wrong place"


# -- fuzz ------------------------------------------------------------------------------

_CLEAN_SEGMENTS = st.sampled_from(["a", "b", "s", "t", "escape", "outside", "secret",
                                   "d" * 247, ".", ""])
_SEGMENTS = st.one_of(_CLEAN_SEGMENTS, st.sampled_from(["..", "x" * 255, "y" * 300]))


def _names(segments: st.SearchStrategy[str], leads: list[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda lead, parts: lead + "/".join(parts), st.sampled_from(leads),
                     st.lists(segments, min_size=1, max_size=4))


_CLEAN_NAMES = _names(_CLEAN_SEGMENTS, ["", "./"])
_NAMES = _names(_SEGMENTS, ["", "./", "/", "../"])
_TARGETS = st.one_of(
    _NAMES,
    st.sampled_from([".", "..", "../..", "../outside", "../../outside/secret", "a/../..",
                     "s/../../..", "/", "/etc", "/etc/passwd", "", "t/" * 40 + "../" * 42]))
_ALLOWED_KINDS = st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE])
_KINDS = st.one_of(_ALLOWED_KINDS, st.sampled_from([tarfile.LNKTYPE, tarfile.CHRTYPE,
                                                    tarfile.BLKTYPE, tarfile.FIFOTYPE, b"Z"]))
_MODES = st.sampled_from([0o644, 0o755, 0o4755, 0o2755, 0o1777, 0o777, 0o000, 0o7777])


@dataclass(frozen=True)
class Entry:
    kind: bytes
    name: str
    link: str
    mode: int
    data: bytes


_DATA = st.binary(max_size=64)
# Mostly entries an upload may hold (links to anywhere, though), so that examples get far
# enough for links, replacements and traversals to meet; then at most one of anything.
_ENTRIES = st.builds(
    lambda clean, bad, at: clean[:at] + bad + clean[at:],
    st.lists(st.builds(Entry, _ALLOWED_KINDS, _CLEAN_NAMES, _TARGETS, _MODES, _DATA),
             min_size=1, max_size=14),
    st.lists(st.builds(Entry, _KINDS, _NAMES, _TARGETS, _MODES, _DATA), max_size=1),
    st.integers(min_value=0, max_value=14))


def _archive(entries: list[Entry], outside: Path, chain: bool) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if chain:  # the PATH_MAX prelude's directories and links, then the fuzz's entries
            prelude = tarfile.open(fileobj=io.BytesIO(cve_2025_4517_archive(
                Path("/a/b/c/d"), outside, outside / "secret")))
            for member in prelude.getmembers()[:32]:
                tar.addfile(member)
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.type, info.linkname, info.mode = entry.kind, entry.link, entry.mode
            if entry.kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                info.devmajor, info.devminor = 1, 3
            regular = entry.kind in (tarfile.REGTYPE, b"Z")
            info.size = len(entry.data) if regular else 0
            tar.addfile(info, io.BytesIO(entry.data) if regular else None)
    return buffer.getvalue()


def _inside(relative: str, target: str) -> bool:
    where = posixpath.normpath(posixpath.join(posixpath.dirname(relative), target))
    return not target.startswith("/") and where != ".." and not where.startswith("../")


def check_tree(target: Path) -> None:
    """Every kept entry is a file, directory or link inside ``target``, owned by sandbox
    root, a file with one link and no setuid, setgid, sticky or group/other write bit,
    a link pointing inside the tree."""
    for dirpath, dirnames, filenames in os.walk(target):
        for name in (".", *dirnames, *filenames):
            path = os.path.join(dirpath, name)
            relative = os.path.relpath(path, target)
            info = os.lstat(path)
            assert (info.st_uid, info.st_gid) == (SANDBOX_ROOT, SANDBOX_ROOT), relative
            mode = info.st_mode
            if stat.S_ISREG(mode):
                assert info.st_nlink == 1, relative
                assert not stat.S_IMODE(mode) & 0o7022, (relative, oct(mode))
            elif stat.S_ISLNK(mode):
                assert _inside(relative, os.readlink(path)), (relative, os.readlink(path))
            else:
                assert stat.S_ISDIR(mode), (relative, oct(mode))


def _expected(entries: list[Entry]) -> dict[str, tuple[str, bytes | str]]:
    """What an accepted upload must leave: later files and links win."""
    final: dict[str, tuple[str, bytes | str]] = {}
    for entry in entries:
        name = "/".join(p for p in entry.name.split("/") if p not in ("", "."))
        if entry.kind == tarfile.DIRTYPE:
            continue
        final[name] = ("file", entry.data) if entry.kind == tarfile.REGTYPE \
            else ("link", entry.link)
    return final


@pytest.fixture(scope="module")
def fuzz_root() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="bac-fuzz-"))
    yield top
    shutil.rmtree(top)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(entries=_ENTRIES, chain=st.booleans())
def test_fuzzed_archives_stay_in_the_tree(fuzz_root: Path, entries: list[Entry],
                                          chain: bool) -> None:
    """Random mixes of '..', absolute and over-long names, links to outside, absolute and
    relative targets, hard links, devices, FIFOs, unknown types, duplicate names and
    directories replaced by files (after the PATH_MAX link prelude or not): nothing
    outside the target changes, every kept entry is inside and harmless, a failure is a
    TemplateBuildError, and an accepted upload left exactly its files and links."""
    host = Host.make(Path(tempfile.mkdtemp(dir=fuzz_root)))
    archive = host.top / "upload.tar"
    archive.write_bytes(_archive(entries, host.outside, chain))
    before = host.untouched()
    error = asyncio.run(_attempt(archive, host))
    event("accepted" if error is None else re.sub(r"'[^']*'", "'...'", str(error))[:90])
    assert host.untouched() == before
    assert error is None or isinstance(error, TemplateBuildError), repr(error)
    assert not isinstance(error, DiskFullError), error
    check_tree(host.target)
    if error is None:
        for name, (kind, value) in _expected(entries).items():
            path = host.target / name
            if kind == "file":
                assert path.read_bytes() == value, name
            else:
                assert os.readlink(path) == value, name
    shutil.rmtree(host.top)


# -- through a real server ------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with running("build-context", BAC_POOL_SIZE="0") as srv:
        srv.create_key("tenant")
        yield srv


def _upload_raw(api: httpx.Client, template_id: str, data: bytes) -> str:
    files_hash = secrets.token_hex(32)
    link = api.get(f"/templates/{template_id}/files/{files_hash}")
    check("GET", TPL + "/files/{hash}", link)
    assert link.status_code == 201 and link.json()["present"] is False, link.text
    put = httpx.put(link.json()["url"], content=data, timeout=60)
    check("PUT", TPL + "/files/{hash}", put)
    assert put.status_code == 201, put.text
    return files_hash


@pytest.mark.slow
def test_crafted_context_fails_the_build_through_the_api(server: ServerProcess) -> None:
    """A tenant uploads the CVE-2025-4517 context and builds a template copying it: the
    build ends in error naming the COPY step and the refused entry, and the root-owned
    directory and 0600 file on the host are untouched."""
    top = Path(tempfile.mkdtemp(prefix="bac-victim-"))
    try:
        host = Host.make(top)
        before = host.untouched()
        with httpx.Client(base_url=server.url, headers={"X-API-KEY": server.keys[0]},
                          timeout=60) as api:
            requested = request_build(api, f"ctx-escape-{secrets.token_hex(4)}")
            template_id, build_id = requested["templateID"], requested["buildID"]
            # The server unpacks under <data>/layers/.tmp/<work>/scratch/context: the
            # escape goes up to / from there, as from any directory this deep or less.
            deep = server.data_dir / "layers" / ".tmp" / "work" / "scratch" / "context"
            files_hash = _upload_raw(api, template_id, cve_2025_4517_archive(
                deep, host.outside, host.secret))
            steps = [{"type": "COPY", "args": [".", "/srv/"], "filesHash": files_hash}]
            started = start(api, template_id, build_id, {"fromTemplate": "base",
                                                         "steps": steps})
            assert started.status_code == 202, started.text
            done = wait(api, template_id, build_id)
        assert host.untouched() == before
        assert sorted(os.listdir(host.outside)) == ["secret"]
        assert done["status"] == "error"
        message = done["reason"]["message"]
        assert "COPY ." in message and "refused" in message, message
        assert "passes through a symbolic link" in message, message
        assert done["reason"]["step"] == "1"
    finally:
        shutil.rmtree(top)

