"""Files through the gateway with the official SDK: read/write, listing, watch, signed URLs."""

from __future__ import annotations

import time

import httpx
import pytest
from e2b import FileType, Sandbox
from e2b.exceptions import NotFoundException
from e2b.sandbox.filesystem.watch_handle import FilesystemEventType


def test_write_read_list_rename_remove(sbx: Sandbox) -> None:
    """The basic file operations round-trip text and bytes."""
    sbx.files.write("/home/user/dir/a.txt", "hello")
    sbx.files.write("/home/user/dir/b.bin", b"\x00\xff" * 1000)
    assert sbx.files.read("/home/user/dir/a.txt") == "hello"
    assert sbx.files.read("/home/user/dir/b.bin", format="bytes") == b"\x00\xff" * 1000
    names = {e.name: e.type for e in sbx.files.list("/home/user/dir")}
    assert names == {"a.txt": FileType.FILE, "b.bin": FileType.FILE}
    sbx.files.rename("/home/user/dir/a.txt", "/home/user/dir/c.txt")
    assert not sbx.files.exists("/home/user/dir/a.txt")
    sbx.files.remove("/home/user/dir/c.txt")
    with pytest.raises(NotFoundException):
        sbx.files.read("/home/user/dir/c.txt")
    assert sbx.files.make_dir("/home/user/new") is True
    assert sbx.files.get_info("/home/user/new").type == FileType.DIR


def test_large_file_round_trip(sbx: Sandbox) -> None:
    """An 8 MiB file goes up and comes back byte-exact through the gateway."""
    payload = bytes(range(256)) * (32 * 1024)
    sbx.files.write("/tmp/big.bin", payload)
    assert sbx.files.read("/tmp/big.bin", format="bytes") == payload


def test_watch_dir_sees_changes(sbx: Sandbox) -> None:
    """watch_dir reports a file created in the watched directory."""
    sbx.files.make_dir("/home/user/watched")
    handle = sbx.files.watch_dir("/home/user/watched")
    try:
        sbx.files.write("/home/user/watched/new.txt", "x")
        deadline = time.monotonic() + 15
        names: set[tuple[str, FilesystemEventType]] = set()
        # get_new_events is the SDK's polling interface; bounded by a deadline.
        while time.monotonic() < deadline and not any(n == "new.txt" for n, _ in names):
            names |= {(e.name, e.type) for e in handle.get_new_events()}
            time.sleep(0.1)
        assert any(n == "new.txt" for n, _ in names), names
    finally:
        handle.stop()


def test_signed_upload_and_download_urls(sbx: Sandbox) -> None:
    """Signed URLs work with a plain HTTP client (no SDK, no token header)."""
    upload = sbx.upload_url("/home/user/signed.txt")
    done = httpx.post(upload, files={"file": ("signed.txt", b"via url")})
    assert done.status_code == 200, done.text
    download = sbx.download_url("/home/user/signed.txt")
    assert httpx.get(download).content == b"via url"


def test_expired_signed_url_is_refused(sbx: Sandbox) -> None:
    """A signed URL past its expiration answers envd's exact 401 body."""
    sbx.files.write("/home/user/old.txt", "x")
    url = sbx.download_url("/home/user/old.txt", use_signature_expiration=-10)
    response = httpx.get(url)
    assert response.status_code == 401
    assert response.json() == {"code": 401, "message": "signature is already expired"}
