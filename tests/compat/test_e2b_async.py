"""The official async SDK against Bac."""

from __future__ import annotations

import asyncio

import pytest
from e2b import AsyncSandbox

pytestmark = pytest.mark.asyncio(loop_scope="function")


async def test_async_create_run_files_kill() -> None:
    """AsyncSandbox creates, runs, streams, writes and reads, and kills."""
    sbx = await AsyncSandbox.create()
    try:
        chunks: list[str] = []
        result = await sbx.commands.run("echo a; echo b", on_stdout=chunks.append)
        assert result.stdout == "a\nb\n" and "".join(chunks) == "a\nb\n"
        await sbx.files.write("/home/user/x.txt", "async")
        assert await sbx.files.read("/home/user/x.txt") == "async"
        assert await sbx.is_running()
    finally:
        await sbx.kill()
    assert not await sbx.is_running()


async def test_async_concurrent_sandboxes() -> None:
    """Several sandboxes created at once each run their own command."""
    sandboxes = await asyncio.gather(*(AsyncSandbox.create() for _ in range(4)))
    try:
        outputs = await asyncio.gather(
            *(s.commands.run(f"echo {i}") for i, s in enumerate(sandboxes))
        )
        assert [o.stdout for o in outputs] == [f"{i}\n" for i in range(4)]
        assert len({s.sandbox_id for s in sandboxes}) == 4
    finally:
        await asyncio.gather(*(s.kill() for s in sandboxes))


async def test_async_stdin_stream_is_delivered_while_open() -> None:
    """A long-lived stdin stream reaches the process piece by piece while it stays open."""
    sbx = await AsyncSandbox.create()
    try:
        seen: asyncio.Queue[str] = asyncio.Queue()
        handle = await sbx.commands.run(
            "cat", background=True, stdin=True, on_stdout=seen.put_nowait
        )
        stream = sbx.commands.stream_input(handle.pid)
        for word in ("one", "two", "three"):
            await stream.send(word + "\n")
            echoed = ""
            async with asyncio.timeout(15):
                while word not in echoed:
                    echoed += await seen.get()
        await stream.close()
        await sbx.commands.close_stdin(handle.pid)
        assert (await handle.wait()).stdout == "one\ntwo\nthree\n"
    finally:
        await sbx.kill()
