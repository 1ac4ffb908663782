"""What an agent tool is and what calling it gives back, in terms every front speaks.

A :class:`ToolSpec` is a tool as a model sees it: a name, a description written for the
model, the JSON Schema of its arguments and hints on its effects (MCP's tool
annotations). A :class:`ToolResult` is what a call returns: text and images for the
model, the same facts as JSON for programs, and whether the call failed. The MCP server
and the framework adapters translate these two shapes and nothing else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolHints:
    """A tool's effects, as MCP's annotations say them: ``read_only`` changes nothing;
    ``destructive`` may lose work (only meaningful when not read-only); ``idempotent``
    called twice with the same arguments does nothing more; ``open_world`` reaches beyond
    Bac (a command in a sandbox may use the network)."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


@dataclass(frozen=True)
class ToolSpec:
    """One tool: ``parameters`` is the JSON Schema (an object) of its arguments."""

    name: str
    title: str
    description: str
    parameters: Mapping[str, Any]
    hints: ToolHints


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    """An image for the model: ``data`` is base64, ``mime_type`` e.g. ``image/png``."""

    data: str
    mime_type: str


Part = TextPart | ImagePart


@dataclass(frozen=True)
class ToolResult:
    """What one call gave back. ``content`` is for the model (text first); ``data`` the
    same facts as JSON; ``is_error``: the call failed, and ``content`` says why in one
    clear sentence (never a stack trace)."""

    content: tuple[Part, ...]
    data: Mapping[str, Any] = field(default_factory=dict)
    is_error: bool = False

    @property
    def text(self) -> str:
        """Every text part, joined: what a text-only framework hands the model."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def images(self) -> tuple[ImagePart, ...]:
        return tuple(p for p in self.content if isinstance(p, ImagePart))

    @classmethod
    def failure(cls, message: str) -> ToolResult:
        return cls((TextPart(message),), {"error": message}, is_error=True)


# Called with each chunk of output a long call produces (a command's stdout), as it comes.
Progress = Callable[[str], Awaitable[None]]
