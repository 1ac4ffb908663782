"""``bac mcp`` driven over stdio by the official MCP SDK's client, against a real server
and real sandboxes."""

from __future__ import annotations

import sys

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp_session import call, run_scenario, texts

pytestmark = [pytest.mark.root, pytest.mark.slow]


def bac_mcp(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-c", "from bac.cli import main; main()", "mcp"],
        env=env)


async def test_a_session_creates_runs_charts_saves_restores_and_kills(
        client_env: dict[str, str]) -> None:
    """The issue's scenario through `bac mcp`: every step's answer as a model sees it."""
    async with Client(bac_mcp(client_env)) as client:
        await run_scenario(client)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tools_carry_their_hints_and_schemas(client_env: dict[str, str],
                                                   mode: str) -> None:
    """Read-only, destructive and idempotent hints, and an object schema per tool, to a
    client of the current protocol and to one of the initialize handshake's (what most
    desktop clients speak)."""
    async with Client(bac_mcp(client_env), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"create_sandbox", "run_command", "run_code", "read_file", "write_file",
            "list_files", "get_port_url", "pause_sandbox", "resume_sandbox",
            "checkpoint_sandbox", "restore_sandbox", "fork_sandbox", "kill_sandbox",
            "read_trace", "list_sandboxes"} <= set(tools)
    for tool in tools.values():
        assert tool.input_schema["type"] == "object" and tool.description
        assert tool.annotations is not None
    assert tools["read_file"].annotations.read_only_hint is True
    assert tools["kill_sandbox"].annotations.destructive_hint is True
    assert tools["kill_sandbox"].annotations.idempotent_hint is True
    assert tools["create_sandbox"].annotations.destructive_hint is False
    assert tools["run_command"].annotations.open_world_hint is True


async def test_mistakes_come_back_as_one_clear_line(client_env: dict[str, str]) -> None:
    """A wrong argument, an unknown sandbox, an unknown tool, code in a sandbox without a
    kernel: isError and a sentence naming the problem, never a stack trace."""
    async with Client(bac_mcp(client_env)) as client:
        wrong = await client.call_tool("run_command", {"sandbox_id": "nosuchbox",
                                                       "command": 42})
        missing = await client.call_tool("read_file", {"sandbox_id": "nosuchbox",
                                                       "path": "/etc/hostname"})
        unknown = await client.call_tool("launch_rockets", {})
        created = await call(client, "create_sandbox", timeout=120)
        assert created.structured_content is not None
        box = created.structured_content["sandbox_id"]
        try:
            no_kernel = await client.call_tool("run_code", {"sandbox_id": box,
                                                            "code": "1 + 1"})
        finally:
            await call(client, "kill_sandbox", sandbox_id=box)
    for result in (wrong, missing, unknown, no_kernel):
        assert result.is_error
        assert "Traceback" not in texts(result) and len(texts(result).splitlines()) == 1
    assert "command" in texts(wrong)
    assert "nosuchbox" in texts(missing)
    assert "launch_rockets" in texts(unknown)
    assert texts(no_kernel).startswith("run_code: nothing listens on port 49999")
    assert "code-interpreter template" in texts(no_kernel)


def test_bac_mcp_without_a_key_says_so() -> None:
    """No API key: one line on stderr, before any client speaks."""
    from click.testing import CliRunner

    from bac.cli import cli

    env = {k: None for k in ("BAC_API_KEY", "E2B_API_KEY")}
    done = CliRunner().invoke(cli, ["mcp"], env=env)
    assert done.exit_code == 3, done.output
    assert "no API key" in done.output and "Traceback" not in done.output


async def test_resources_list_the_keys_sandboxes(client_env: dict[str, str]) -> None:
    """bac://sandboxes is listed and reads as JSON; an unknown resource is refused."""
    async with Client(bac_mcp(client_env)) as client:
        listed = await client.list_resources()
        assert "bac://sandboxes" in {str(r.uri) for r in listed.resources}
        shown = await client.read_resource("bac://sandboxes")
        assert isinstance(shown.contents[0], types.TextResourceContents)
        with pytest.raises(Exception, match="no resource"):
            await client.read_resource("bac://nothing")


async def test_pause_resume_fork_ports_and_listing(client_env: dict[str, str]) -> None:
    """The lifecycle tools: a port's URL, pause (twice: the second says so), resume with
    the processes still there, a fork that sees the same files, list by metadata."""
    async with Client(bac_mcp(client_env)) as client:
        created = await call(client, "create_sandbox", timeout=240,
                             metadata={"case": "lifecycle"})
        assert created.structured_content is not None
        box = created.structured_content["sandbox_id"]
        forks: list[str] = []
        try:
            await call(client, "write_file", sandbox_id=box, path="kept.txt", content="1")
            await call(client, "write_file", sandbox_id=box, path="long.txt",
                       content="héllo" * 1000)
            cut = await call(client, "read_file", sandbox_id=box, path="long.txt",
                             max_bytes=2)  # inside the é: left out, not mangled
            assert texts(cut) == "h\n[... cut at 2 of 6000 bytes ...]"
            await call(client, "run_command", sandbox_id=box,
                       command="sleep 600 >/dev/null 2>&1 & echo $! > sleeper.pid")
            url = await call(client, "get_port_url", sandbox_id=box, port=8000)
            assert url.structured_content is not None
            assert url.structured_content["url"].startswith(f"http://8000-{box}.")

            assert "Paused" in texts(await call(client, "pause_sandbox", sandbox_id=box))
            again = await call(client, "pause_sandbox", sandbox_id=box)
            assert "already paused" in texts(again)
            await call(client, "resume_sandbox", sandbox_id=box, timeout=240)
            alive = await call(client, "run_command", sandbox_id=box,
                               command="kill -0 $(cat sleeper.pid) && echo alive")
            assert "alive" in texts(alive)

            forked = await call(client, "fork_sandbox", sandbox_id=box)
            assert forked.structured_content is not None
            forks = forked.structured_content["sandbox_ids"]
            assert len(forks) == 1 and forks[0] != box
            seen = await call(client, "read_file", sandbox_id=forks[0], path="kept.txt")
            assert texts(seen) == "1"
            home = await call(client, "list_files", sandbox_id=box)
            assert "kept.txt" in texts(home)

            listed = await call(client, "list_sandboxes", metadata={"case": "lifecycle"})
            assert listed.structured_content is not None
            ids = {s["sandboxId"] for s in listed.structured_content["sandboxes"]}
            assert box in ids
        finally:
            for sandbox_id in [box, *forks]:
                await client.call_tool("kill_sandbox", {"sandbox_id": sandbox_id})
