"""Commands and PTYs through the SDK against a real envd process on the host."""

from __future__ import annotations

import asyncio

import pytest
from sdk_envd_host import HostEnvd, envd_sandbox

import bac
from bac import AsyncSandbox, PtySize


async def test_run_foreground(sbx: AsyncSandbox) -> None:
    """A foreground command returns its output and exit code 0."""
    result = await sbx.commands.run("echo hello; echo oops >&2")
    assert (result.stdout, result.stderr, result.exit_code) == ("hello\n", "oops\n", 0)


async def test_nonzero_exit_raises_with_output(sbx: AsyncSandbox) -> None:
    """A non-zero exit raises CommandExitError carrying stdout, stderr and the code."""
    with pytest.raises(bac.CommandExitError) as caught:
        await sbx.commands.run("echo partial; echo bad >&2; exit 7")
    assert caught.value.exit_code == 7
    assert caught.value.stdout == "partial\n"
    assert caught.value.stderr == "bad\n"


async def test_callbacks_stream_in_order(sbx: AsyncSandbox) -> None:
    """on_stdout/on_stderr receive every chunk; sync and async callbacks both work."""
    out: list[str] = []
    err: list[str] = []

    async def on_err(text: str) -> None:
        err.append(text)

    result = await sbx.commands.run(
        "for i in 1 2 3; do echo $i; echo e$i >&2; done", on_stdout=out.append, on_stderr=on_err
    )
    assert "".join(out) == result.stdout == "1\n2\n3\n"
    assert "".join(err) == "e1\ne2\ne3\n"


async def test_env_cwd_and_sandbox_env(sbx: AsyncSandbox, host_envd: HostEnvd) -> None:
    """Per-command envs and cwd apply; init env vars are visible; default cwd is the workdir."""
    result = await sbx.commands.run(
        'echo "$FOO|$BAC_TEST_GLOBAL|$(pwd)"', envs={"FOO": "bar"}, cwd="/tmp"
    )
    assert result.stdout == "bar|from-init|/tmp\n"
    again = await sbx.commands.run('echo "[$FOO]" && pwd')
    assert again.stdout == f"[]\n{host_envd.workdir}\n"


async def test_background_stdin_and_wait(sbx: AsyncSandbox) -> None:
    """A background command reads what send_stdin writes and ends when stdin closes."""
    handle = await sbx.commands.run("cat", background=True, stdin=True)
    assert handle.exit_code is None
    await handle.send_stdin("abc\n")
    await handle.send_stdin(b"def\n")
    await handle.close_stdin()
    result = await handle.wait()
    assert result.stdout == "abc\ndef\n"


async def test_kill_background_command(sbx: AsyncSandbox) -> None:
    """kill() ends a running command; waiting then reports the signal; a second kill is False."""
    handle = await sbx.commands.run("sleep 30", background=True)
    assert await handle.kill() is True
    with pytest.raises(bac.CommandExitError) as caught:
        await handle.wait()
    assert caught.value.exit_code != 0
    assert await sbx.commands.kill(handle.pid) is False


async def test_command_timeout_kills_it(sbx: AsyncSandbox) -> None:
    """timeout bounds the process's life: a sleeping command ends with an error."""
    with pytest.raises((bac.TimeoutError, bac.CommandExitError)):
        await sbx.commands.run("sleep 30", timeout=1)


async def test_list_and_connect(sbx: AsyncSandbox) -> None:
    """A background process is listed, and a second connection receives its later output."""
    handle = await sbx.commands.run(
        "read line; echo got:$line", background=True, stdin=True
    )
    listed = {p.pid: p for p in await sbx.commands.list()}
    assert handle.pid in listed
    assert listed[handle.pid].args[-1] == "read line; echo got:$line"
    seen: list[str] = []
    other = await sbx.commands.connect(handle.pid, on_stdout=seen.append)
    await sbx.commands.send_stdin(handle.pid, "x\n")
    result = await other.wait()
    assert result.stdout == "got:x\n" == "".join(seen)
    await handle.disconnect()


async def test_connect_to_unknown_pid(sbx: AsyncSandbox) -> None:
    """Connecting to a pid envd does not know is a NotFoundError."""
    with pytest.raises(bac.NotFoundError):
        await sbx.commands.connect(999_999)


async def test_broken_utf8_is_replaced(sbx: AsyncSandbox) -> None:
    """Invalid UTF-8 at the end of output decodes to U+FFFD instead of failing."""
    result = await sbx.commands.run("printf 'aaa\\xe2'")
    assert result.stdout == "aaa\ufffd"


async def test_pty_session(sbx: AsyncSandbox) -> None:
    """A PTY echoes typed input, reports its size, resizes, and ends on exit."""
    output = bytearray()
    changed = asyncio.Event()

    def on_data(chunk: bytes) -> None:
        output.extend(chunk)
        changed.set()

    async def until(marker: bytes) -> None:
        async with asyncio.timeout(15):
            while marker not in output:
                changed.clear()
                await changed.wait()

    handle = await sbx.pty.create(PtySize(rows=24, cols=80), on_data, timeout=0)
    await sbx.pty.send_input(handle.pid, "stty size; echo MARK1\n")
    await until(b"24 80")
    await sbx.pty.resize(handle.pid, PtySize(rows=40, cols=100))
    await sbx.pty.send_input(handle.pid, b"stty size\n")
    await until(b"40 100")
    await sbx.pty.send_input(handle.pid, b"exit 3\n")
    with pytest.raises(bac.CommandExitError) as caught:
        await handle.wait()
    assert caught.value.exit_code == 3


async def test_wrong_token_is_rejected(host_envd: HostEnvd) -> None:
    """A sandbox object with the wrong access token gets AuthenticationError."""
    bad = envd_sandbox(HostEnvd(host_envd.url, "wrong", host_envd.workdir, {}))
    try:
        with pytest.raises(bac.AuthenticationError):
            await bad.commands.run("true")
        with pytest.raises(bac.AuthenticationError):
            await bad.files.list(".")
    finally:
        await bad.aclose()
