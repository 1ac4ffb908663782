"""Bac's sandbox tools as LangChain tools, called the way a LangChain agent calls them.

It runs offline: the model's turns are scripted ``AIMessage``s with ``tool_calls``, as
any chat model bound to the tools (``model.bind_tools(tools)``) would produce; each
call goes through the tool's own interface (``ainvoke`` with the tool call), which
returns the ``ToolMessage`` the agent hands back to the model.

    pip install 'bac[langchain]'
    BAC_API_URL=http://localhost:3000 BAC_API_KEY=... python examples/langchain_agent.py
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bac.agents import SandboxTools
from bac.agents.langchain_tools import langchain_tools


def scripted_model(messages: list[BaseMessage]) -> AIMessage:
    """The model's next message: create a sandbox, list /etc, read the trace, kill it."""
    results = [m for m in messages if isinstance(m, ToolMessage)]

    def call(name: str, /, **args: Any) -> AIMessage:
        return AIMessage(content="", tool_calls=[{"name": name, "args": args,
                                                  "id": f"call_{len(results)}"}])

    if not results:
        return call("create_sandbox", timeout=120, metadata={"example": "langchain"})
    box = results[0].artifact["sandbox_id"]
    steps = [
        lambda: call("run_command", sandbox_id=box, command="ls /etc | wc -l"),
        lambda: call("read_trace", sandbox_id=box, kinds="process"),
        lambda: call("run_command", sandbox_id=box, command=42),  # a model's mistake
        lambda: call("kill_sandbox", sandbox_id=box),
    ]
    if len(results) <= len(steps):
        return steps[len(results) - 1]()
    return AIMessage(content="Done: /etc listed, the trace read, the sandbox killed.")


async def main() -> None:
    tools = {tool.name: tool for tool in langchain_tools(SandboxTools())}
    messages: list[BaseMessage] = [HumanMessage("How many entries does /etc have?")]
    while True:
        message = scripted_model(messages)
        messages.append(message)
        if not message.tool_calls:
            print("answer:", message.content)
            return
        for tool_call in message.tool_calls:
            answer = await tools[tool_call["name"]].ainvoke(tool_call)
            assert isinstance(answer, ToolMessage)
            text = answer.content if isinstance(answer.content, str) else \
                answer.content[0]["text"]  # type: ignore[index]
            print(f"tool ({answer.status}):", text.splitlines()[0])
            messages.append(answer)


if __name__ == "__main__":
    asyncio.run(main())
