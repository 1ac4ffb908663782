"""The sandbox tools for Anthropic's Messages API: tool definitions and a dispatcher of
``tool_use`` blocks.

Plain JSON both ways, so the ``anthropic`` package is not needed (its objects are
accepted as they are)::

    tools = SandboxTools()
    dispatcher = AnthropicDispatcher(tools)
    message = client.messages.create(model=..., max_tokens=1024, messages=messages,
                                     tools=tool_definitions(tools))
    messages.append({"role": "assistant", "content": message.content})
    if message.stop_reason == "tool_use":
        messages.append(await dispatcher.reply_to(message))

Tool results carry text and images (a chart from ``run_code``) and ``is_error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bac.agents._model import ImagePart, TextPart
from bac.agents._toolkit import SandboxTools


def tool_definitions(tools: SandboxTools) -> list[dict[str, Any]]:
    """The ``tools`` of a Messages request."""
    return [{"name": spec.name, "description": spec.description,
             "input_schema": dict(spec.parameters)}
            for spec in tools.specs]


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


class AnthropicDispatcher:
    """Carries out ``tool_use`` blocks and answers them as ``tool_result`` blocks."""

    def __init__(self, tools: SandboxTools) -> None:
        self._tools = tools

    async def result_for(self, block: Any) -> dict[str, Any]:
        """The ``tool_result`` block answering one ``tool_use`` block."""
        result = await self._tools.call(str(_field(block, "name")), _field(block, "input"))
        content: list[dict[str, Any]] = []
        for part in result.content:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                content.append({"type": "image", "source": {
                    "type": "base64", "media_type": part.mime_type, "data": part.data}})
        return {"type": "tool_result", "tool_use_id": _field(block, "id"),
                "content": content, "is_error": result.is_error}

    async def reply_to(self, message: Any) -> dict[str, Any]:
        """The ``user`` message answering every ``tool_use`` block of an assistant
        ``message`` (a Message object or its dict), in order."""
        blocks = [b for b in _field(message, "content") or []
                  if _field(b, "type") == "tool_use"]
        return {"role": "user", "content": [await self.result_for(b) for b in blocks]}
