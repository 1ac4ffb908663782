"""One agent's session through an MCP client, the same whatever the transport: the
issue's scenario, checked step by step."""

from __future__ import annotations

import base64
import json
from typing import Any

import mcp_types as types
from mcp import Client

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

CHART = """
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("squares")
plt.show()
print("drawn")
"""


def texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def call(client: Client, tool: str, /, **arguments: Any) -> types.CallToolResult:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, texts(result)
    return result


async def run_scenario(client: Client) -> None:
    """Create, command (with progress), chart, write/read, checkpoint, restore, kill."""
    created = await call(client, "create_sandbox", template="code-interpreter",
                         timeout=240, metadata={"via": "mcp"})
    assert created.structured_content is not None
    sandbox_id = created.structured_content["sandbox_id"]
    assert sandbox_id in texts(created)
    try:
        progress: list[str] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        ran = await client.call_tool(
            "run_command", {"sandbox_id": sandbox_id,
                            "command": "echo one; echo two >&2; exit 3"},
            progress_callback=on_progress)
        assert not ran.is_error, texts(ran)
        assert ran.structured_content == {"exit_code": 3, "stdout": "one\n",
                                          "stderr": "two\n"}
        assert "exit code 3" in texts(ran)
        assert "".join(progress) in ("one\ntwo\n", "two\none\n")

        chart = await call(client, "run_code", sandbox_id=sandbox_id, code=CHART)
        images = [c for c in chart.content if isinstance(c, types.ImageContent)]
        assert images, (texts(chart), chart.structured_content)
        assert len(images) == 1 and images[0].mime_type == "image/png"
        assert base64.b64decode(images[0].data).startswith(PNG_SIGNATURE)
        assert "drawn" in texts(chart)

        await call(client, "write_file", sandbox_id=sandbox_id, path="/tmp/notes.txt",
                   content="first draft\n")
        read = await call(client, "read_file", sandbox_id=sandbox_id, path="/tmp/notes.txt")
        assert texts(read) == "first draft\n"
        listed = await call(client, "list_files", sandbox_id=sandbox_id, path="/tmp")
        assert "/tmp/notes.txt" in texts(listed)

        saved = await call(client, "checkpoint_sandbox", sandbox_id=sandbox_id,
                           name="draft")
        assert "draft" in texts(saved)
        await call(client, "write_file", sandbox_id=sandbox_id, path="/tmp/notes.txt",
                   content="overwritten\n")
        await call(client, "restore_sandbox", sandbox_id=sandbox_id, checkpoint="draft")
        read = await call(client, "read_file", sandbox_id=sandbox_id, path="/tmp/notes.txt")
        assert texts(read) == "first draft\n"

        # Lifecycle events are written with the change (process reports come in batches).
        trace = await call(client, "read_trace", sandbox_id=sandbox_id)
        assert trace.structured_content is not None
        kinds = [event["kind"] for event in trace.structured_content["events"]]
        assert kinds[0] == "created" and "created" in texts(trace)

        resources = await client.list_resources()
        uris = {str(r.uri) for r in resources.resources}
        assert f"bac://sandboxes/{sandbox_id}" in uris
        shown = await client.read_resource(f"bac://sandboxes/{sandbox_id}")
        content = shown.contents[0]
        assert isinstance(content, types.TextResourceContents)
        assert json.loads(content.text)["metadata"] == {"via": "mcp"}
    finally:
        killed = await call(client, "kill_sandbox", sandbox_id=sandbox_id)
    assert killed.structured_content is not None and killed.structured_content["killed"]
    gone = await client.call_tool("run_command", {"sandbox_id": sandbox_id,
                                                  "command": "true"})
    assert gone.is_error
    assert "Traceback" not in texts(gone) and sandbox_id in texts(gone)
