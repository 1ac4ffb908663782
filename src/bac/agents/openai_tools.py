"""The sandbox tools for OpenAI's APIs: tool definitions and a dispatcher of tool calls.

Plain JSON both ways, so the ``openai`` package is not needed (its objects are accepted
as they are)::

    tools = SandboxTools()
    dispatcher = OpenAIDispatcher(tools)
    response = client.chat.completions.create(model=..., messages=messages,
                                              tools=chat_tool_definitions(tools))
    message = response.choices[0].message
    messages.append(message)
    messages += await dispatcher.messages_for(message.tool_calls or [])

A tool message can carry only text, so the images a call returns (a chart from
``run_code``) follow as one user message of ``image_url`` parts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from bac.agents._model import ToolResult
from bac.agents._toolkit import SandboxTools


def chat_tool_definitions(tools: SandboxTools) -> list[dict[str, Any]]:
    """The ``tools`` of a Chat Completions request."""
    return [{"type": "function",
             "function": {"name": spec.name, "description": spec.description,
                          "parameters": dict(spec.parameters)}}
            for spec in tools.specs]


def response_tool_definitions(tools: SandboxTools) -> list[dict[str, Any]]:
    """The ``tools`` of a Responses API request."""
    return [{"type": "function", "name": spec.name, "description": spec.description,
             "parameters": dict(spec.parameters)}
            for spec in tools.specs]


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


class OpenAIDispatcher:
    """Carries out the tool calls a model asked for and answers them in OpenAI's shapes."""

    def __init__(self, tools: SandboxTools) -> None:
        self._tools = tools

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """One call; ``arguments`` as the model wrote them (a JSON string)."""
        if not isinstance(arguments, str):
            return await self._tools.call(name, arguments)
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return ToolResult.failure(
                f"{name}: the arguments are not valid JSON: {arguments[:200]!r}")
        return await self._tools.call(name, parsed)

    async def messages_for(self, tool_calls: Iterable[Any]) -> list[dict[str, Any]]:
        """The Chat Completions messages answering ``tool_calls`` (a message's
        ``tool_calls``, objects or dicts): one ``tool`` message per call, then one
        ``user`` message with the images the calls returned, if any."""
        answers: list[dict[str, Any]] = []
        images: list[dict[str, Any]] = []
        for tool_call in tool_calls:
            function = _field(tool_call, "function")
            call_id = _field(tool_call, "id")
            result = await self.call(str(_field(function, "name")),
                                     _field(function, "arguments"))
            answers.append({"role": "tool", "tool_call_id": call_id,
                            "content": result.text})
            images += [{"type": "image_url",
                        "image_url": {"url": f"data:{i.mime_type};base64,{i.data}"}}
                       for i in result.images]
        if images:
            answers.append({"role": "user", "content": [
                {"type": "text", "text": "The images the tool calls above returned:"},
                *images]})
        return answers

    async def outputs_for(self, items: Iterable[Any]) -> list[dict[str, Any]]:
        """The Responses API input items answering the ``function_call`` items of a
        response's ``output`` (others are skipped); images as ``input_image`` parts."""
        answers: list[dict[str, Any]] = []
        for item in items:
            if _field(item, "type") != "function_call":
                continue
            result = await self.call(str(_field(item, "name")), _field(item, "arguments"))
            output: list[dict[str, Any]] = [{"type": "input_text", "text": result.text}]
            output += [{"type": "input_image",
                        "image_url": f"data:{i.mime_type};base64,{i.data}"}
                       for i in result.images]
            answers.append({"type": "function_call_output",
                            "call_id": _field(item, "call_id"), "output": output})
        return answers
