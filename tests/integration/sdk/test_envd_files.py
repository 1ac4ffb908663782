"""Files through the SDK against a real envd process on the host."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import AsyncIterator

import httpx
import pytest
from sdk_envd_host import HostEnvd

import bac
from bac import AsyncSandbox, FilesystemEvent, FilesystemEventType, FileType


@pytest.fixture
def d(host_envd: HostEnvd, request: pytest.FixtureRequest) -> str:
    """A fresh absolute directory for one test (relative paths would land in $HOME)."""
    path = host_envd.workdir / request.node.name
    path.mkdir()
    return str(path)


async def test_write_and_read_text_bytes_stream(sbx: AsyncSandbox, d: str) -> None:
    """What is written comes back identical as text, bytes and a stream."""
    info = await sbx.files.write(f"{d}/notes/a.txt", "héllo\n")
    assert (info.path, info.name, info.type) == (f"{d}/notes/a.txt", "a.txt", FileType.FILE)
    assert await sbx.files.read(f"{d}/notes/a.txt") == "héllo\n"
    payload = bytes(range(256)) * 1000
    await sbx.files.write(f"{d}/blob.bin", payload)
    assert await sbx.files.read(f"{d}/blob.bin", format="bytes") == payload
    received = bytearray()
    async with await sbx.files.read(f"{d}/blob.bin", format="stream") as stream:
        async for chunk in stream:
            received.extend(chunk)
    assert bytes(received) == payload


async def test_write_empty_file(sbx: AsyncSandbox, d: str) -> None:
    """An empty file round-trips as empty."""
    await sbx.files.write(f"{d}/empty.txt", b"")
    assert await sbx.files.read(f"{d}/empty.txt", format="bytes") == b""


async def test_write_many_files_in_one_call(sbx: AsyncSandbox, d: str) -> None:
    """write_files writes several files and reports them in the order given."""
    infos = await sbx.files.write_files(
        [{"path": f"{d}/many/one.txt", "data": "1"}, {"path": f"{d}/many/two.txt", "data": b"2"},
         {"path": f"{d}/many/three.txt", "data": io.BytesIO(b"3")}]
    )
    assert [i.name for i in infos] == ["one.txt", "two.txt", "three.txt"]
    for name, data in (("one", "1"), ("two", "2"), ("three", "3")):
        assert await sbx.files.read(f"{d}/many/{name}.txt") == data


async def test_streamed_upload(sbx: AsyncSandbox, d: str) -> None:
    """An async iterable of chunks is uploaded as a stream and arrives whole."""
    chunk = os.urandom(64 * 1024)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(32):
            yield chunk

    info = await sbx.files.write(f"{d}/streamed.bin", chunks())
    assert info.name == "streamed.bin"
    assert await sbx.files.read(f"{d}/streamed.bin", format="bytes") == chunk * 32


async def test_stat_list_exists(sbx: AsyncSandbox, d: str) -> None:
    """get_info, list and exists describe what is on disk."""
    await sbx.files.write(f"{d}/tree/x/y.txt", "yy")
    info = await sbx.files.get_info(f"{d}/tree/x/y.txt")
    assert (info.type, info.size, info.name) == (FileType.FILE, 2, "y.txt")
    assert info.modified_time is not None and info.modified_time.tzinfo is not None
    names = [e.name for e in await sbx.files.list(f"{d}/tree", depth=2)]
    assert names == ["x", "y.txt"]
    assert (await sbx.files.list(f"{d}/tree"))[0].type is FileType.DIR
    assert await sbx.files.exists(f"{d}/tree/x/y.txt")
    assert not await sbx.files.exists(f"{d}/tree/nope")


async def test_missing_path_errors(sbx: AsyncSandbox, d: str) -> None:
    """Reading, statting or listing a missing path raises PathNotFoundError."""
    with pytest.raises(bac.PathNotFoundError):
        await sbx.files.read(f"{d}/does/not/exist")
    with pytest.raises(FileNotFoundError):
        await sbx.files.get_info(f"{d}/does/not/exist")
    with pytest.raises(bac.PathNotFoundError):
        await sbx.files.list(f"{d}/does/not/exist")


async def test_make_dir_rename_remove(sbx: AsyncSandbox, d: str) -> None:
    """make_dir is False when the dir exists; rename moves; remove deletes and tolerates absence."""
    assert await sbx.files.make_dir(f"{d}/d1/d2") is True
    assert await sbx.files.make_dir(f"{d}/d1/d2") is False
    await sbx.files.write(f"{d}/d1/d2/f.txt", "f")
    moved = await sbx.files.rename(f"{d}/d1/d2/f.txt", f"{d}/d1/g.txt")
    assert moved.name == "g.txt"
    assert await sbx.files.read(f"{d}/d1/g.txt") == "f"
    await sbx.files.remove(f"{d}/d1")
    assert not await sbx.files.exists(f"{d}/d1")
    await sbx.files.remove(f"{d}/d1")


async def test_watch_dir(sbx: AsyncSandbox, d: str) -> None:
    """watch_dir delivers a CREATE for a new file and calls on_exit once stopped."""
    await sbx.files.make_dir(f"{d}/watched")
    events: list[FilesystemEvent] = []
    created = asyncio.Event()
    exits: list[BaseException | None] = []

    def on_event(event: FilesystemEvent) -> None:
        events.append(event)
        if event.type is FilesystemEventType.CREATE and event.name == "new.txt":
            created.set()

    handle = await sbx.files.watch_dir(f"{d}/watched", on_event, on_exit=exits.append, timeout=30)
    await sbx.files.write(f"{d}/watched/new.txt", "x")
    async with asyncio.timeout(10):
        await created.wait()
    await handle.stop()
    assert exits == [None]
    assert not handle.running


async def test_watch_missing_dir(sbx: AsyncSandbox, d: str) -> None:
    """Watching a directory that does not exist fails at once with PathNotFoundError."""
    with pytest.raises(bac.PathNotFoundError):
        await sbx.files.watch_dir(f"{d}/no-such-dir", lambda _: None)


async def test_signed_urls(sbx: AsyncSandbox, d: str) -> None:
    """Signed URLs work without the token; an expired one is refused with 401."""
    url = sbx.upload_url(f"{d}/signed/up.txt")
    async with httpx.AsyncClient() as client:
        up = await client.post(url, files={"file": ("up.txt", b"signed data")})
        assert up.status_code == 200, up.text
        down = await client.get(sbx.download_url(f"{d}/signed/up.txt", use_signature_expiration=60))
        assert down.content == b"signed data"
        expired = sbx.download_url(f"{d}/signed/up.txt", use_signature_expiration=-1)
        refused = await client.get(expired)
        assert refused.status_code == 401
        assert refused.json()["message"] == "signature is already expired"
        unsigned = await client.get(sbx.download_url(f"{d}/signed/up.txt").split("&signature")[0])
        assert unsigned.status_code == 401
