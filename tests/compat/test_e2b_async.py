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
