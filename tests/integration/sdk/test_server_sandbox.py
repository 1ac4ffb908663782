"""Bac's SDK end to end: a real server, real sandboxes, everything through the gateway."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
import pytest_asyncio
from sdk_server import BacServer

import bac
from bac import AsyncSandbox, SandboxQuery, SandboxState

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest_asyncio.fixture  # on the session loop, like the tests
async def box(bac_server: BacServer) -> AsyncIterator[AsyncSandbox]:
    """A fresh sandbox, killed after the test."""
    sandbox = await AsyncSandbox.create(timeout=120, **bac_server.opts())
    async with sandbox:
        yield sandbox


async def test_create_run_and_info(box: AsyncSandbox, bac_server: BacServer) -> None:
    """A created sandbox runs commands as its default user and describes itself."""
    result = await box.commands.run("whoami && pwd && echo ok")
    assert result.stdout.splitlines()[-1] == "ok"
    info = await box.get_info()
    assert info.sandbox_id == box.sandbox_id
    assert info.state is SandboxState.RUNNING
    assert info.end_at > datetime.now(UTC)
    assert await box.is_running()
    same = await AsyncSandbox.get_info(box.sandbox_id, **bac_server.opts())
    assert same.started_at == info.started_at


async def test_metadata_envs_and_list_filters(bac_server: BacServer) -> None:
    """Create-time metadata filters the list; envs reach every command; pages have tokens."""
    tag = f"t{time.monotonic_ns()}"
    boxes = [
        await AsyncSandbox.create(timeout=120, metadata={"run": tag, "i": str(i)},
                                  envs={"SBX_INDEX": str(i)}, **bac_server.opts())
        for i in range(2)
    ]
    try:
        assert (await boxes[1].commands.run("echo $SBX_INDEX")).stdout == "1\n"
        query = SandboxQuery(metadata={"run": tag})
        found = [i async for i in AsyncSandbox.list(query, **bac_server.opts()).all()]
        assert {i.sandbox_id for i in found} == {b.sandbox_id for b in boxes}
        assert found[0].sandbox_id == boxes[1].sandbox_id  # newest first
        paginator = AsyncSandbox.list(query, limit=1, **bac_server.opts())
        first = await paginator.next_items()
        assert len(first) == 1 and paginator.has_next and paginator.next_token
        second = await paginator.next_items()
        assert {first[0].sandbox_id, second[0].sandbox_id} == {b.sandbox_id for b in boxes}
        assert not paginator.has_next
        one = SandboxQuery(metadata={"run": tag, "i": "0"})
        only = await AsyncSandbox.list(one, **bac_server.opts()).next_items()
        assert [i.sandbox_id for i in only] == [boxes[0].sandbox_id]
    finally:
        for sandbox in boxes:
            await sandbox.kill()
            await sandbox.aclose()


async def test_set_timeout_and_connect(box: AsyncSandbox, bac_server: BacServer) -> None:
    """set_timeout moves the end time; connect by id reaches the same sandbox."""
    await box.set_timeout(600)
    later = (await box.get_info()).end_at
    assert (later - datetime.now(UTC)).total_seconds() > 500
    other = await AsyncSandbox.connect(box.sandbox_id, **bac_server.opts())
    try:
        await box.files.write("/tmp/shared.txt", "from the first handle")
        assert await other.files.read("/tmp/shared.txt") == "from the first handle"
        # connect never shortens a timeout
        assert (await other.get_info()).end_at >= later
    finally:
        await other.aclose()


async def test_kill_makes_everything_fail_clearly(bac_server: BacServer) -> None:
    """After kill: is_running is False, envd calls raise SandboxNotRunningError, kill is False."""
    sandbox = await AsyncSandbox.create(timeout=120, **bac_server.opts())
    try:
        assert await sandbox.kill() is True
        assert await sandbox.is_running() is False
        with pytest.raises(bac.SandboxNotRunningError):
            await sandbox.commands.run("true")
        with pytest.raises(bac.SandboxNotRunningError):
            await sandbox.files.read("/etc/hostname")
        assert await AsyncSandbox.kill(sandbox.sandbox_id, **bac_server.opts()) is False
        with pytest.raises(bac.SandboxNotFoundError):
            await AsyncSandbox.get_info(sandbox.sandbox_id, **bac_server.opts())
    finally:
        await sandbox.aclose()


async def test_killed_while_command_runs(bac_server: BacServer) -> None:
    """A command in flight when its sandbox dies ends with SandboxNotRunningError."""
    sandbox = await AsyncSandbox.create(timeout=120, **bac_server.opts())
    try:
        started = asyncio.Event()
        handle = await sandbox.commands.run(
            "echo up; sleep 60", background=True, on_stdout=lambda _: started.set(), timeout=0
        )
        async with asyncio.timeout(30):
            await started.wait()
        await sandbox.kill()
        with pytest.raises(bac.SandboxNotRunningError):
            async with asyncio.timeout(30):
                await handle.wait()
    finally:
        await sandbox.aclose()


async def test_timeout_ends_the_sandbox(bac_server: BacServer) -> None:
    """A sandbox whose timeout passes is gone: is_running turns False."""
    sandbox = await AsyncSandbox.create(timeout=120, **bac_server.opts())
    try:
        await sandbox.set_timeout(1)
        deadline = time.monotonic() + 30
        # The server kills on its own clock; poll the observable state with a deadline.
        while await sandbox.is_running():
            assert time.monotonic() < deadline, "sandbox outlived its timeout by 30s"
            await asyncio.sleep(0.2)
    finally:
        await sandbox.kill()
        await sandbox.aclose()


async def test_auth_and_tenancy(box: AsyncSandbox, bac_server: BacServer) -> None:
    """A wrong key is AuthenticationError; another team cannot see or touch the sandbox."""
    with pytest.raises(bac.AuthenticationError):
        await AsyncSandbox.get_info(box.sandbox_id, api_url=bac_server.url, api_key="bogus")
    other = {"api_url": bac_server.url, "api_key": bac_server.other_team_key}
    with pytest.raises(bac.SandboxNotFoundError):
        await AsyncSandbox.get_info(box.sandbox_id, **other)
    with pytest.raises(bac.SandboxNotFoundError):
        await AsyncSandbox.connect(box.sandbox_id, **other)
    assert await AsyncSandbox.kill(box.sandbox_id, **other) is False
    listed = [i.sandbox_id async for i in AsyncSandbox.list(**other).all()]
    assert box.sandbox_id not in listed
    assert await box.is_running()


async def test_unknown_template_and_bad_timeout(bac_server: BacServer) -> None:
    """An unknown template is NotFoundError; a bad timeout fails before any request."""
    with pytest.raises(bac.NotFoundError):
        await AsyncSandbox.create("no-such-template-xyz", **bac_server.opts())
    with pytest.raises(bac.InvalidArgumentError):
        await AsyncSandbox.create(timeout=-5, **bac_server.opts())
    with pytest.raises(bac.InvalidArgumentError, match="number of seconds"):
        await AsyncSandbox.create(timeout="10", **bac_server.opts())  # type: ignore[arg-type]


async def test_argument_mistakes_are_argument_errors(box: AsyncSandbox) -> None:
    """A mistake in a call's arguments is an InvalidArgumentError saying which, raised
    before anything is sent: not a timeout, a TypeError from inside, or an
    authentication error."""
    with pytest.raises(bac.InvalidArgumentError, match="timeout must be >= 0"):
        await box.commands.run("true", timeout=-1)
    with pytest.raises(bac.InvalidArgumentError, match="number of seconds"):
        await box.commands.run("true", timeout="10")  # type: ignore[arg-type]
    with pytest.raises(bac.InvalidArgumentError, match="request_timeout"):
        await box.files.read("/etc/hostname", request_timeout=-3)
    with pytest.raises(bac.InvalidArgumentError, match="timeout"):
        await box.set_timeout(-1)
    with pytest.raises(bac.UnknownUserError, match="no user 'nosuchuser'"):
        await box.commands.run("id", user="nosuchuser")
    with pytest.raises(bac.UnknownUserError):
        await box.files.read("/etc/hostname", user="nosuchuser")
    # The sandbox's credentials were never the problem.
    assert (await box.commands.run("echo ok")).stdout == "ok\n"


async def test_file_errors_read_as_text_not_python(box: AsyncSandbox) -> None:
    """A failed file call says what failed in words (``/proc/version: permission
    denied``), without Python's ``[Errno 13]`` and quoting."""
    failures: list[BaseException] = []
    for call in (box.files.write("/proc/version", "x"), box.files.remove("/proc/version"),
                 box.files.make_dir("/etc/passwd/x")):
        with pytest.raises(bac.SandboxError) as caught:
            await call
        failures.append(caught.value)
    for failure in failures:
        assert "[Errno" not in str(failure) and "'/" not in str(failure), str(failure)
    assert "/proc/version: " in str(failures[0])


async def test_an_overwritten_passwd_does_not_lock_out_the_sandbox(box: AsyncSandbox) -> None:
    """File calls act as root (as E2B's do), so a caller can overwrite /etc/passwd; the
    default user and root still run commands and move files afterwards."""
    await box.files.write("/etc/passwd", "garbage\n")
    ran = await box.commands.run("id -u; echo ran")
    assert ran.stdout == "1000\nran\n"
    assert (await box.commands.run("id -u", user="root")).stdout == "0\n"
    await box.files.write("/tmp/after.txt", "still here")
    assert await box.files.read("/tmp/after.txt") == "still here"
    assert (await box.files.get_info("/tmp/after.txt")).owner in ("user", "1000")


async def test_files_and_signed_urls_through_gateway(box: AsyncSandbox) -> None:
    """Files move through the gateway; signed URLs work without the token."""
    await box.files.write("/tmp/g/one.txt", "one")
    assert [e.name for e in await box.files.list("/tmp/g")] == ["one.txt"]
    async with httpx.AsyncClient(headers={"E2b-Sandbox-Id": box.sandbox_id,
                                          "E2b-Sandbox-Port": "49983"}) as client:
        got = await client.get(box.download_url("/tmp/g/one.txt", use_signature_expiration=60))
        assert got.status_code == 200 and got.content == b"one"
        put = await client.post(box.upload_url("/tmp/g/two.txt"),
                                files={"file": ("two.txt", b"two")})
        assert put.status_code == 200
    assert await box.files.read("/tmp/g/two.txt") == "two"


async def test_pty_through_gateway(box: AsyncSandbox) -> None:
    """A PTY session works through the gateway's streaming."""
    output = bytearray()
    seen = asyncio.Event()

    def on_data(data: bytes) -> None:
        output.extend(data)
        if b"PTYOK" in output:
            seen.set()

    handle = await box.pty.create(bac.PtySize(rows=24, cols=80), on_data, timeout=0)
    # The typed line echoes as PTY''OK; only the command's output contains PTYOK.
    await box.pty.send_input(handle.pid, "echo PTY''OK\n")
    async with asyncio.timeout(20):
        await seen.wait()
    assert await box.pty.kill(handle.pid)


def test_sync_sandbox_context_kills(bac_server: BacServer) -> None:
    """The sync twin runs commands and kills the sandbox when the with-block ends."""
    with bac.Sandbox.create(timeout=120, **bac_server.opts()) as sandbox:
        assert sandbox.commands.run("echo sync").stdout == "sync\n"
        sandbox_id = sandbox.sandbox_id
        assert sandbox.get_host(8080).startswith(f"8080-{sandbox_id}.")
    with pytest.raises(bac.SandboxNotFoundError):
        bac.Sandbox.get_info(sandbox_id, **bac_server.opts())
