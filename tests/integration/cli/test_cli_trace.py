"""``bac trace`` against a real server, and the SDK's ``Sandbox.trace`` / ``follow_trace``
/ ``logs`` / ``get_metrics`` under it (blocking and async)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result
from sdk_server import BacServer

import bac
from bac.cli import cli

pytestmark = [pytest.mark.root, pytest.mark.slow]


def bac_cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def _wait_process(sandbox: bac.Sandbox, marker: str, after: int = 0) -> bac.TraceEvent:
    with sandbox.follow_trace(kinds=["process"], after=after) as stream:
        for event in stream:
            if marker in event.fields["cmd"]:
                return event
    raise AssertionError("the trace ended without the process")


def test_sdk_trace_follow_logs_and_metrics(bac_server: BacServer) -> None:
    opts = {"api_key": bac_server.api_key, "api_url": bac_server.url}
    run_id = "sdk-run"
    with bac.Sandbox.create(timeout=60, metadata={"run_id": run_id}, **opts) as sandbox:
        sandbox.commands.run("echo traced # m-sdk")
        seen = _wait_process(sandbox, "m-sdk")
        assert seen.fields["exit_code"] == 0 and seen.fields["stdout_bytes"] == 7
        assert seen.metadata == {"run_id": run_id}
        page = sandbox.trace(kinds=["created", "process"], limit=1)
        assert [e.kind for e in page.events] == ["created"] and page.next_cursor is not None
        rest = sandbox.trace(kinds=["created", "process"], after=page.next_cursor)
        assert [e.kind for e in rest.events] == ["process"] and rest.next_cursor is None
        assert bac.Sandbox.trace(sandbox.sandbox_id, **opts).events[0].kind == "created"
        run = bac.Sandbox.trace_run({"run_id": run_id}, **opts)
        assert {e.sandbox_id for e in run.events} == {sandbox.sandbox_id}
        logs = sandbox.logs()
        assert logs[0].message.startswith("created") and logs[0].level == "info"
        assert any(x.fields.get("exit_code") == "0" for x in logs)  # E2B's entries: text
        assert isinstance(sandbox.get_metrics(), list)
        with pytest.raises(bac.InvalidArgumentError):
            sandbox.trace(kinds=["nonsense"])
    with pytest.raises(bac.SandboxNotFoundError):
        bac.Sandbox.trace("nosuchsandbox", **opts)


async def test_async_follow_ends_with_the_sandbox(bac_server: BacServer) -> None:
    opts = {"api_key": bac_server.api_key, "api_url": bac_server.url}
    sandbox = await bac.AsyncSandbox.create(timeout=60, **opts)
    async with sandbox:
        start = (await sandbox.trace(limit=1000)).events[-1].id
        stream = sandbox.follow_trace(after=start)
        await sandbox.commands.run("true # m-async")
        async for event in stream:
            if event.kind == "process" and "m-async" in event.fields["cmd"]:
                break
        await sandbox.kill()
        kinds = [event.kind async for event in stream]
        assert kinds[-1] == "killed"


def test_bac_trace_table_json_run_and_follow(cli_env: dict[str, str],
                                            bac_server: BacServer) -> None:
    opts = {"api_key": bac_server.api_key, "api_url": bac_server.url}
    with bac.Sandbox.create(timeout=60, metadata={"run_id": "cli-run"}, **opts) as sandbox:
        with pytest.raises(bac.CommandExitError):
            sandbox.commands.run("false # m-cli")
        _wait_process(sandbox, "m-cli")
        sandbox.kill()
    sid = sandbox.sandbox_id
    shown = bac_cli(cli_env, "trace", sid, "--json")
    assert shown.exit_code == 0, shown.output
    events = json.loads(shown.stdout)
    assert events[0]["kind"] == "created" and events[-1]["kind"] == "killed"
    failed = [e for e in events if e["kind"] == "process"]
    assert failed[0]["fields"]["exit_code"] == 1 and failed[0]["level"] == "warn"
    table = bac_cli(cli_env, "trace", sid, "--kind", "process")
    assert table.exit_code == 0 and "m-cli" in table.stdout and "created" not in table.stdout
    run = bac_cli(cli_env, "trace", "--metadata", "run_id=cli-run", "--json")
    assert run.exit_code == 0 and {e["sandbox_id"] for e in json.loads(run.stdout)} == {sid}
    # An ended sandbox's follow prints what it has, one JSON object a line, and ends.
    followed = bac_cli(cli_env, "trace", sid, "--follow", "--json")
    assert followed.exit_code == 0, followed.output
    lines = [json.loads(x) for x in followed.stdout.splitlines()]
    assert [x["kind"] for x in lines] == [e["kind"] for e in events]
    missing = bac_cli(cli_env, "trace", "nosuchsandbox")
    assert missing.exit_code == 4 and "nosuchsandbox" in missing.output
    both = bac_cli(cli_env, "trace", sid, "--metadata", "run_id=x")
    assert both.exit_code == 2
    bad = bac_cli(cli_env, "trace", sid, "--kind", "nonsense")
    assert bad.exit_code != 0 and "nonsense" in bad.output
