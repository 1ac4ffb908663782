"""The sandbox tools as LangChain tools (the ``langchain`` extra: ``langchain-core``).

::

    tools = langchain_tools(SandboxTools())
    model = chat_model.bind_tools(tools)          # any LangChain chat model
    ...
    for call in ai_message.tool_calls:
        messages.append(await by_name[call["name"]].ainvoke(call))   # a ToolMessage

Each tool is a ``StructuredTool`` with the tool's JSON Schema as its arguments, async
only (``ainvoke``; agents built on LangGraph call tools that way). Its answer is
``content_and_artifact``: the content a model reads (text, and images as standard image
blocks), the JSON as the artifact. A failed call is a ``ToolMessage`` with status
``error`` and the one-line reason.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from bac.agents._model import ImagePart, TextPart, ToolSpec
from bac.agents._toolkit import SandboxTools

Content = list[str | dict[str, Any]]


def _tool(tools: SandboxTools, spec: ToolSpec) -> BaseTool:
    async def run(**arguments: Any) -> tuple[Content, dict[str, Any]]:
        result = await tools.call(spec.name, arguments)
        if result.is_error:
            raise ToolException(result.text)
        content: Content = []
        for part in result.content:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                content.append({"type": "image", "base64": part.data,
                                "mime_type": part.mime_type})
        return content, dict(result.data)

    return StructuredTool(
        name=spec.name, description=spec.description, args_schema=dict(spec.parameters),
        coroutine=run, response_format="content_and_artifact", handle_tool_error=True,
        handle_validation_error=True)


def langchain_tools(tools: SandboxTools) -> list[BaseTool]:
    """Every sandbox tool as a LangChain tool acting with ``tools``' key."""
    return [_tool(tools, spec) for spec in tools.specs]
