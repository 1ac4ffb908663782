"""An agent loop on Anthropic's Messages API with Bac's sandbox tools.

It runs offline: the model is scripted (``scripted_model`` answers the ``anthropic``
client through an in-process HTTP transport), so its turns are canned while the sandbox
work is real. Use ``AsyncAnthropic()`` instead of ``scripted_client()`` for a real model.

    pip install 'bac[anthropic]'
    BAC_API_URL=http://localhost:3000 BAC_API_KEY=... python examples/anthropic_agent.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
from anthropic import AsyncAnthropic

from bac.agents import SandboxTools
from bac.agents.anthropic_tools import AnthropicDispatcher, tool_definitions

TASK = "Save a checkpoint, break the sandbox's notes, then restore them."


def scripted_model(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content of the model's next message, from the conversation so far."""
    results = [block for m in messages if m["role"] == "user" and isinstance(m["content"], list)
               for block in m["content"] if block.get("type") == "tool_result"]
    texts = [" ".join(c["text"] for c in r["content"] if c["type"] == "text") for r in results]

    def use(tool: str, /, **arguments: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": f"Calling {tool}."},
                {"type": "tool_use", "id": f"toolu_{len(results)}", "name": tool,
                 "input": arguments}]

    if not results:
        return use("create_sandbox", timeout=120)
    box = texts[0].split()[2].rstrip(";")  # "Created sandbox <id> from ..."
    steps = [
        lambda: use("write_file", sandbox_id=box, path="notes.txt", content="keep me\n"),
        lambda: use("checkpoint_sandbox", sandbox_id=box, name="notes"),
        lambda: use("run_command", sandbox_id=box, command="echo broken > notes.txt"),
        lambda: use("restore_sandbox", sandbox_id=box, checkpoint="notes"),
        lambda: use("read_file", sandbox_id=box, path="notes.txt"),
        lambda: use("kill_sandbox", sandbox_id=box),
    ]
    if len(results) <= len(steps):
        return steps[len(results) - 1]()
    return [{"type": "text", "text": f"Restored; notes.txt reads {texts[-2].strip()!r}."}]


def scripted_client() -> AsyncAnthropic:
    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        content = scripted_model(body["messages"])
        uses_tool = any(block["type"] == "tool_use" for block in content)
        return httpx2.Response(200, json={
            "id": "msg_scripted", "type": "message", "role": "assistant",
            "model": body["model"], "content": content,
            "stop_reason": "tool_use" if uses_tool else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}})

    return AsyncAnthropic(api_key="scripted", base_url="http://scripted.model",
                          http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))


async def main() -> None:
    tools = SandboxTools()  # BAC_API_URL and BAC_API_KEY from the environment
    dispatcher = AnthropicDispatcher(tools)
    messages: list[Any] = [{"role": "user", "content": TASK}]
    async with scripted_client() as client:
        while True:
            message = await client.messages.create(
                model="scripted", max_tokens=1024, messages=messages,
                tools=tool_definitions(tools))  # type: ignore[arg-type]  # plain JSON
            messages.append({"role": "assistant",
                             "content": [b.model_dump(exclude_none=True)
                                         for b in message.content]})
            if message.stop_reason != "tool_use":
                print("answer:", message.content[0].text)  # type: ignore[union-attr]
                return
            reply = await dispatcher.reply_to(message)
            for result in reply["content"]:
                print("tool:", result["content"][0]["text"].splitlines()[0])
            messages.append(reply)


if __name__ == "__main__":
    asyncio.run(main())
