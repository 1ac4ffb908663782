"""The sync twin drives the same envd with blocking calls, including callbacks and watches."""

from __future__ import annotations

import threading
import time

import pytest
from sdk_envd_host import HostEnvd

import bac
from bac import FilesystemEventType, Sandbox


def test_run_and_callbacks(sync_sbx: Sandbox) -> None:
    """A blocking run returns the result; callbacks run on the SDK's loop thread."""
    threads: set[str] = set()
    chunks: list[str] = []

    def on_stdout(text: str) -> None:
        threads.add(threading.current_thread().name)
        chunks.append(text)

    result = sync_sbx.commands.run("echo one; echo two", on_stdout=on_stdout)
    assert result.stdout == "one\ntwo\n" == "".join(chunks)
    assert threads == {"bac-sdk-loop"}


def test_exit_error_and_background(sync_sbx: Sandbox) -> None:
    """Non-zero exit raises; a background handle takes stdin and is waited on."""
    with pytest.raises(bac.CommandExitError):
        sync_sbx.commands.run("exit 2")
    handle = sync_sbx.commands.run("tr a-z A-Z", background=True, stdin=True)
    handle.send_stdin("shout\n")
    handle.close_stdin()
    assert handle.wait().stdout == "SHOUT\n"


def test_files_round_trip(sync_sbx: Sandbox, host_envd: HostEnvd) -> None:
    """Blocking writes (bytes, sync iterables) and reads (text, stream) round-trip."""
    base = f"{host_envd.workdir}/sync-files"
    sync_sbx.files.write(f"{base}/a.txt", "alpha")
    sync_sbx.files.write(f"{base}/b.bin", iter([b"be", b"ta"]))
    assert sync_sbx.files.read(f"{base}/a.txt") == "alpha"
    with sync_sbx.files.read(f"{base}/b.bin", format="stream") as stream:
        assert b"".join(stream) == b"beta"
    assert {e.name for e in sync_sbx.files.list(base)} == {"a.txt", "b.bin"}


def test_watch_polling(sync_sbx: Sandbox, host_envd: HostEnvd) -> None:
    """A sync watch queues events until get_new_events drains them."""
    base = f"{host_envd.workdir}/sync-watch"
    sync_sbx.files.make_dir(base)
    watch = sync_sbx.files.watch_dir(base)
    try:
        sync_sbx.files.write(f"{base}/w.txt", "w")
        deadline = time.monotonic() + 10
        seen = []
        # Events arrive on the SDK's thread; poll the queue with a deadline.
        while time.monotonic() < deadline and not any(
            e.type is FilesystemEventType.CREATE for e in seen
        ):
            seen += watch.get_new_events()
            time.sleep(0.05)
        assert any(e.type is FilesystemEventType.CREATE and e.name == "w.txt" for e in seen)
    finally:
        watch.stop()
