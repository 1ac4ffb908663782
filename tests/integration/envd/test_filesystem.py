"""The filesystem service and /files through the official e2b SDK."""

from __future__ import annotations

import os
from datetime import UTC
from pathlib import Path

import pytest
from e2b import (
    FileNotFoundException,
    FileType,
    InvalidArgumentException,
    Sandbox,
    SandboxException,
)

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]


def test_write_and_read_text_and_bytes(sandbox: Sandbox, workdir: Path) -> None:
    """Text and binary files round-trip through upload and download unchanged."""
    info = sandbox.files.write(str(workdir / "note.txt"), "héllo\n")
    assert (info.name, info.path, info.type) == (
        "note.txt",
        str(workdir / "note.txt"),
        FileType.FILE,
    )
    assert sandbox.files.read(str(workdir / "note.txt")) == "héllo\n"
    blob = bytes(range(256)) * 64
    sandbox.files.write(str(workdir / "blob.bin"), blob)
    assert bytes(sandbox.files.read(str(workdir / "blob.bin"), format="bytes")) == blob
    assert (workdir / "blob.bin").read_bytes() == blob


def test_empty_file_round_trips(sandbox: Sandbox, workdir: Path) -> None:
    """A zero-byte file can be written and read."""
    sandbox.files.write(str(workdir / "empty"), b"")
    assert sandbox.files.read(str(workdir / "empty"), format="bytes") == bytearray()


def test_relative_paths_resolve_against_home(sandbox: Sandbox) -> None:
    """A relative path is joined with the user's home (root: /root), not the cwd."""
    name = f"bac-envd-test-{os.getpid()}.txt"
    try:
        info = sandbox.files.write(name, "x")
        assert info.path == f"/root/{name}"
    finally:
        sandbox.files.remove(f"/root/{name}")


def test_write_many_files_in_one_request(sandbox: Sandbox, workdir: Path) -> None:
    """write_files uploads several files (creating parents) and reports each in order."""
    entries = [{"path": str(workdir / f"d{i}" / f"f{i}.txt"), "data": f"n{i}"} for i in range(5)]
    infos = sandbox.files.write_files(entries)  # type: ignore[arg-type]
    assert [i.path for i in infos] == [e["path"] for e in entries]
    for i in range(5):
        assert (workdir / f"d{i}" / f"f{i}.txt").read_text() == f"n{i}"


def test_gzip_upload_and_download(sandbox: Sandbox, workdir: Path) -> None:
    """gzip=True uploads a gzipped octet-stream and downloads gzipped; content is intact."""
    text = "compressible " * 10_000
    sandbox.files.write(str(workdir / "g.txt"), text, gzip=True)
    assert (workdir / "g.txt").read_text() == text
    assert sandbox.files.read(str(workdir / "g.txt"), gzip=True) == text


def test_streamed_upload_from_file_object(sandbox: Sandbox, workdir: Path, tmp_path: Path) -> None:
    """A file-like object is streamed with octet-stream and lands byte-exact."""
    source = tmp_path / "src.bin"
    source.write_bytes(os.urandom(300_000))
    with source.open("rb") as f:
        sandbox.files.write(str(workdir / "streamed.bin"), f)
    assert (workdir / "streamed.bin").read_bytes() == source.read_bytes()


def test_metadata_is_stored_and_reported(sandbox: Sandbox, workdir: Path) -> None:
    """metadata= becomes user.e2b.* xattrs (keys lower-cased) and comes back in EntryInfo."""
    path = str(workdir / "meta.txt")
    sandbox.files.write(path, "x", metadata={"Owner": "alice", "stage": "raw"})
    assert sandbox.files.get_info(path).metadata == {"owner": "alice", "stage": "raw"}
    assert os.getxattr(path, "user.e2b.owner") == b"alice"
    sandbox.files.write(path, "y")  # a new upload replaces the whole set
    assert sandbox.files.get_info(path).metadata is None


def test_entry_info_fields(sandbox: Sandbox, workdir: Path) -> None:
    """get_info reports Go-style permissions, mode bits, owner names and a UTC mtime."""
    path = workdir / "info.txt"
    sandbox.files.write(str(path), "12345")
    info = sandbox.files.get_info(str(path))
    assert (info.size, info.mode, info.permissions) == (5, 0o644, "-rw-r--r--")
    assert (info.owner, info.group) == ("root", "root")
    assert info.modified_time.tzinfo is not None
    assert info.modified_time.astimezone(UTC).timestamp() == pytest.approx(
        path.stat().st_mtime, abs=1e-3
    )
    directory = sandbox.files.get_info(str(workdir))
    assert directory.type == FileType.DIR and directory.permissions.startswith("d")
    assert directory.size > 0


def test_symlink_entry_describes_the_target(sandbox: Sandbox, workdir: Path) -> None:
    """A symlink reports its target's type and mode, the link's permissions, the target."""
    (workdir / "target.txt").write_text("t")
    os.chmod(workdir / "target.txt", 0o600)
    (workdir / "link").symlink_to("target.txt")
    info = sandbox.files.get_info(str(workdir / "link"))
    assert info.type == FileType.FILE
    assert (info.mode, info.permissions) == (0o600, "Lrwxrwxrwx")
    assert info.symlink_target == str(workdir / "target.txt")


def test_list_depth_and_order(sandbox: Sandbox, workdir: Path) -> None:
    """list() is pre-order and name-sorted per directory; depth limits recursion."""
    for rel in ("b/z.txt", "b/a.txt", "a.txt", "c/d/e.txt"):
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(rel)
    top = [e.name for e in sandbox.files.list(str(workdir))]
    assert top == ["a.txt", "b", "c"]
    deep = [os.path.relpath(e.path, workdir) for e in sandbox.files.list(str(workdir), depth=2)]
    assert deep == ["a.txt", "b", "b/a.txt", "b/z.txt", "c", "c/d"]


def test_list_errors(sandbox: Sandbox, workdir: Path) -> None:
    """Listing a missing path is not found; listing a file is an invalid argument."""
    (workdir / "file").write_text("x")
    with pytest.raises(FileNotFoundException):
        sandbox.files.list(str(workdir / "missing"))
    with pytest.raises(InvalidArgumentException, match="not a directory"):
        sandbox.files.list(str(workdir / "file"))


def test_make_dir_semantics(sandbox: Sandbox, workdir: Path) -> None:
    """make_dir creates parents (0755), reports False if it exists, refuses a file."""
    assert sandbox.files.make_dir(str(workdir / "x" / "y")) is True
    assert oct((workdir / "x" / "y").stat().st_mode & 0o777) == "0o755"
    assert sandbox.files.make_dir(str(workdir / "x" / "y")) is False
    (workdir / "plain").write_text("x")
    with pytest.raises(InvalidArgumentException, match="not a directory"):
        sandbox.files.make_dir(str(workdir / "plain"))


def test_rename_and_missing_source(sandbox: Sandbox, workdir: Path) -> None:
    """rename moves (creating parents) and returns the new entry; a missing source is 404."""
    sandbox.files.write(str(workdir / "old.txt"), "data", metadata={"k": "v"})
    info = sandbox.files.rename(str(workdir / "old.txt"), str(workdir / "new" / "new.txt"))
    assert info.path == str(workdir / "new" / "new.txt") and info.metadata == {"k": "v"}
    assert not (workdir / "old.txt").exists()
    with pytest.raises(FileNotFoundException):
        sandbox.files.rename(str(workdir / "nope"), str(workdir / "other"))


def test_remove_is_recursive_and_idempotent(sandbox: Sandbox, workdir: Path) -> None:
    """remove deletes whole trees; removing a missing path succeeds."""
    (workdir / "tree" / "sub").mkdir(parents=True)
    (workdir / "tree" / "sub" / "f").write_text("x")
    sandbox.files.remove(str(workdir / "tree"))
    assert not (workdir / "tree").exists()
    sandbox.files.remove(str(workdir / "tree"))


def test_exists_and_missing_reads(sandbox: Sandbox, workdir: Path) -> None:
    """exists() is True/False; reading a missing file is FileNotFoundException."""
    (workdir / "here").write_text("x")
    assert sandbox.files.exists(str(workdir / "here")) is True
    assert sandbox.files.exists(str(workdir / "gone")) is False
    with pytest.raises(FileNotFoundException, match="does not exist"):
        sandbox.files.read(str(workdir / "gone"))


def test_reading_a_directory_is_invalid(sandbox: Sandbox, workdir: Path) -> None:
    """Downloading a directory is refused with a clear 400."""
    with pytest.raises(InvalidArgumentException, match="is a directory"):
        sandbox.files.read(str(workdir))


def test_uploading_onto_a_directory_is_invalid(sandbox: Sandbox, workdir: Path) -> None:
    """Writing a file where a directory stands is refused with a clear 400."""
    (workdir / "dir").mkdir()
    with pytest.raises(InvalidArgumentException, match="is a directory"):
        sandbox.files.write(str(workdir / "dir"), "x")


def test_nul_byte_path_is_a_clear_error(sandbox: Sandbox, workdir: Path) -> None:
    """A path with a NUL byte is rejected, not passed to the OS."""
    with pytest.raises((InvalidArgumentException, SandboxException), match="NUL"):
        sandbox.files.get_info(str(workdir) + "/a\x00b")
