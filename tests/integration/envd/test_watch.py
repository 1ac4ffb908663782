"""Directory watching: the sync SDK's polled watcher and the async SDK's WatchDir stream."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from e2b import (
    AsyncSandbox,
    FilesystemEvent,
    FilesystemEventType,
    NotFoundException,
    Sandbox,
    SandboxException,
)

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]
CREATE, WRITE, CHMOD = (
    FilesystemEventType.CREATE,
    FilesystemEventType.WRITE,
    FilesystemEventType.CHMOD,
)


def test_upload_of_a_new_file_gives_exactly_three_events(sandbox: Sandbox, workdir: Path) -> None:
    """A new file uploaded into a watched dir yields CREATE, CHMOD, WRITE — exactly 3."""
    handle = sandbox.files.watch_dir(str(workdir))
    try:
        sandbox.files.write(str(workdir / "new.txt"), "hello")
        events = handle.get_new_events()
        assert [(e.name, e.type) for e in events] == [
            ("new.txt", CREATE),
            ("new.txt", CHMOD),
            ("new.txt", WRITE),
        ]
        sandbox.files.write(str(workdir / "new.txt"), "again")
        assert WRITE in [e.type for e in handle.get_new_events()]
    finally:
        handle.stop()


def test_recursive_watch_follows_new_directories(sandbox: Sandbox, workdir: Path) -> None:
    """A recursive watch reports events inside directories created after it started."""
    handle = sandbox.files.watch_dir(str(workdir), recursive=True)
    try:
        sandbox.files.make_dir(str(workdir / "nested"))  # mkdir, then chown to the user
        assert [(e.name, e.type) for e in handle.get_new_events()] == [
            ("nested", CREATE),
            ("nested", CHMOD),
        ]
        sandbox.files.write(str(workdir / "nested" / "file.txt"), "x")
        names = [(e.name, e.type) for e in handle.get_new_events()]
        assert names[0] == ("nested/file.txt", CREATE) and len(names) == 3
    finally:
        handle.stop()


def test_non_recursive_watch_ignores_subdirectories(sandbox: Sandbox, workdir: Path) -> None:
    """Without recursive=True, changes inside a subdirectory are not reported."""
    (workdir / "sub").mkdir()
    handle = sandbox.files.watch_dir(str(workdir))
    try:
        sandbox.files.write(str(workdir / "sub" / "inner.txt"), "x")
        sandbox.files.write(str(workdir / "top.txt"), "x")
        assert {e.name for e in handle.get_new_events()} == {"top.txt"}
    finally:
        handle.stop()


def test_remove_and_rename_events(sandbox: Sandbox, workdir: Path) -> None:
    """Removing and renaming entries produce REMOVE and RENAME (+CREATE of the new name)."""
    (workdir / "a").write_text("x")
    (workdir / "b").write_text("x")
    handle = sandbox.files.watch_dir(str(workdir))
    try:
        sandbox.files.remove(str(workdir / "a"))
        sandbox.files.rename(str(workdir / "b"), str(workdir / "c"))
        seen = [(e.name, e.type) for e in handle.get_new_events()]
        assert ("a", FilesystemEventType.REMOVE) in seen
        assert ("b", FilesystemEventType.RENAME) in seen
        assert ("c", CREATE) in seen
    finally:
        handle.stop()


def test_watch_errors(sandbox: Sandbox, workdir: Path) -> None:
    """Watching a missing path is not found; watching a file is refused."""
    (workdir / "file").write_text("x")
    with pytest.raises(NotFoundException):
        sandbox.files.watch_dir(str(workdir / "missing"))
    with pytest.raises(SandboxException, match="not a directory"):
        sandbox.files.watch_dir(str(workdir / "file"))


def test_stopped_watcher_is_gone(sandbox: Sandbox, workdir: Path) -> None:
    """After stop() the watcher id is unknown to envd."""
    handle = sandbox.files.watch_dir(str(workdir))
    handle.stop()
    with pytest.raises(SandboxException):
        handle.get_new_events()


async def test_async_watch_stream_delivers_events(
    async_sandbox: AsyncSandbox, workdir: Path
) -> None:
    """The async SDK's WatchDir stream delivers events (with entries when asked)."""
    received: list[FilesystemEvent] = []
    done = asyncio.Event()

    def on_event(event: FilesystemEvent) -> None:
        received.append(event)
        if event.type == WRITE:
            done.set()

    handle = await async_sandbox.files.watch_dir(
        str(workdir), on_event, recursive=True, include_entry=True
    )
    try:
        await async_sandbox.files.write(str(workdir / "async.txt"), "data")
        await asyncio.wait_for(done.wait(), 20)
    finally:
        await handle.stop()
    assert [(e.name, e.type) for e in received][:3] == [
        ("async.txt", CREATE),
        ("async.txt", CHMOD),
        ("async.txt", WRITE),
    ]
    entry = received[2].entry
    assert entry is not None and entry.size == 4 and entry.path == str(workdir / "async.txt")
