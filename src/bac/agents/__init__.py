"""Bac for agents: the sandbox tools a model calls, defined once and served to every
agent front.

``SandboxTools`` carries the tools out with the public SDK (``bac.AsyncSandbox``); the
fronts translate its ``ToolSpec`` and ``ToolResult`` only:

- :mod:`bac.agents.mcp_server`: an MCP server (``bac mcp`` over stdio, and the Bac
  server's ``/mcp`` streamable-HTTP endpoint); needs the ``mcp`` extra.
- :mod:`bac.agents.openai_tools` and :mod:`bac.agents.anthropic_tools`: the tools as
  OpenAI's and Anthropic's tool definitions, and a dispatcher of their tool calls (plain
  JSON: no extra needed).
- :mod:`bac.agents.langchain_tools`: LangChain tools; needs the ``langchain`` extra.

See docs/agents.md.
"""

from bac.agents._args import ArgumentError
from bac.agents._model import ImagePart, Part, Progress, TextPart, ToolHints, ToolResult, ToolSpec
from bac.agents._toolkit import SandboxTools

__all__ = [
    "ArgumentError",
    "ImagePart",
    "Part",
    "Progress",
    "SandboxTools",
    "TextPart",
    "ToolHints",
    "ToolResult",
    "ToolSpec",
]
