"""An agent loop on OpenAI's Chat Completions API with Bac's sandbox tools.

It runs offline: the model is scripted (``scripted_model`` answers the ``openai`` client
through an in-process HTTP transport), so its turns are canned while the sandbox work is
real. Use ``AsyncOpenAI()`` instead of ``scripted_client()`` for a real model.

    pip install 'bac[openai]'
    BAC_API_URL=http://localhost:3000 BAC_API_KEY=... python examples/openai_agent.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
from openai import AsyncOpenAI

from bac.agents import SandboxTools
from bac.agents.openai_tools import OpenAIDispatcher, chat_tool_definitions

TASK = "Plot y = x² for x in 1..5 in a sandbox and tell me y at x = 5."
CHART = """
import matplotlib.pyplot as plt
xs = [1, 2, 3, 4, 5]
plt.plot(xs, [x * x for x in xs])
plt.show()
print("y(5) =", 5 * 5)
"""


def scripted_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's next message, from the conversation so far: create a sandbox, plot in
    it, kill it, answer."""
    results = [m["content"] for m in messages if m["role"] == "tool"]

    def call(name: str, /, **arguments: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{len(results)}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}]}

    if not results:
        return call("create_sandbox", template="code-interpreter", timeout=120)
    sandbox_id = results[0].split()[2].rstrip(";")  # "Created sandbox <id> from ..."
    if len(results) == 1:
        return call("run_code", sandbox_id=sandbox_id, code=CHART)
    if len(results) == 2:
        return call("kill_sandbox", sandbox_id=sandbox_id)
    return {"role": "assistant", "content": "y(5) = 25; the chart is above."}


def scripted_client() -> AsyncOpenAI:
    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        message = scripted_model(body["messages"])
        return httpx2.Response(200, json={
            "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0,
            "model": body["model"], "choices": [{
                "index": 0, "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}]})

    return AsyncOpenAI(api_key="scripted", base_url="http://scripted.model/v1",
                       http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))


async def main() -> None:
    tools = SandboxTools()  # BAC_API_URL and BAC_API_KEY from the environment
    dispatcher = OpenAIDispatcher(tools)
    messages: list[Any] = [{"role": "user", "content": TASK}]
    async with scripted_client() as client:
        while True:
            response = await client.chat.completions.create(
                model="scripted", messages=messages,
                tools=chat_tool_definitions(tools))  # type: ignore[arg-type]  # plain JSON
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                print("answer:", message.content)
                return
            for reply in await dispatcher.messages_for(message.tool_calls):
                if reply["role"] == "tool":
                    print("tool:", reply["content"].splitlines()[0])
                else:
                    print("images:", len(reply["content"]) - 1)
                messages.append(reply)


if __name__ == "__main__":
    asyncio.run(main())
