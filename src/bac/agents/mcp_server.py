"""The sandbox tools as an MCP server, on the official ``mcp`` SDK (the ``mcp`` extra).

One low-level ``mcp`` server serves :class:`~bac.agents.SandboxTools`: each
``ToolSpec`` is an MCP tool with its annotations (read-only, destructive, idempotent,
open-world hints), each ``ToolResult`` a ``CallToolResult`` (text, images as image
content, the JSON as structured content, ``isError`` on failure); a command's output is
sent as progress notifications while it runs. The sandboxes the API key can see are
resources (``bac://sandboxes`` and ``bac://sandboxes/{id}``, JSON).

Two transports:

- :func:`serve_stdio`: ``bac mcp``, for a client that starts the server itself (Claude
  Desktop, Cursor, ...), with the API key from the environment.
- :class:`HttpEndpoint`: streamable HTTP, stateless, as an ASGI app the Bac server
  mounts at ``/mcp``: every request carries its API key (``X-API-KEY`` or
  ``Authorization: Bearer``), checked before the MCP layer sees the request, and the
  tools act with that key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar, Unpack

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

from bac import ConnectionOpts, SandboxError, __version__
from bac.agents._model import ImagePart, TextPart, ToolResult, ToolSpec
from bac.agents._toolkit import SandboxTools

SERVER_NAME = "bac"
INSTRUCTIONS = (
    "Bac runs isolated Linux sandboxes. Create one with create_sandbox (template "
    "'code-interpreter' to use run_code), then run commands, run code and move files in it "
    "by its id. Checkpoint before risky steps and restore to undo; pause a sandbox you will "
    "come back to; kill it when done. read_trace tells what ran in it.")
LIST_URI = "bac://sandboxes"
SANDBOX_URI = "bac://sandboxes/{sandbox_id}"
JSON_TYPE = "application/json"
T = TypeVar("T")

Context = ServerRequestContext[Any, Any]
ToolsFor = Callable[[Context], SandboxTools]


def _tool(spec: ToolSpec) -> types.Tool:
    hints = spec.hints
    return types.Tool(
        name=spec.name, title=spec.title, description=spec.description,
        input_schema=dict(spec.parameters),
        annotations=types.ToolAnnotations(
            title=spec.title, read_only_hint=hints.read_only,
            destructive_hint=hints.destructive, idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world))


def _call_result(result: ToolResult) -> types.CallToolResult:
    content: list[types.TextContent | types.ImageContent] = []
    for part in result.content:
        if isinstance(part, TextPart):
            content.append(types.TextContent(type="text", text=part.text))
        elif isinstance(part, ImagePart):
            content.append(types.ImageContent(type="image", data=part.data,
                                              mime_type=part.mime_type))
    return types.CallToolResult(content=list(content), structured_content=dict(result.data),
                                is_error=result.is_error)


def build_server(tools_for: ToolsFor) -> Server[Any]:
    """The MCP server; ``tools_for`` gives the toolkit one request acts with (its key)."""

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(s) for s in tools_for(ctx).specs])

    async def call_tool(ctx: Context, params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        chunks = 0

        async def progress(chunk: str) -> None:
            nonlocal chunks
            chunks += 1
            await ctx.session.report_progress(chunks, None, chunk)

        result = await tools_for(ctx).call(params.name, params.arguments, progress)
        return _call_result(result)

    async def list_resources(ctx: Context, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        found = await _resource_call(tools_for(ctx).sandboxes())
        listed = [types.Resource(uri=LIST_URI, name="sandboxes", title="Your sandboxes",
                                 description="Every sandbox this API key can see, as JSON.",
                                 mime_type=JSON_TYPE)]
        listed += [types.Resource(
            uri=SANDBOX_URI.format(sandbox_id=info.sandbox_id), name=info.sandbox_id,
            title=f"{info.template_id} sandbox, {info.state.value}",
            description=f"Sandbox {info.sandbox_id} ({info.template_id}, {info.state.value}"
                        f", metadata {json.dumps(info.metadata)})",
            mime_type=JSON_TYPE) for info in found]
        return types.ListResourcesResult(resources=listed)

    async def list_templates(ctx: Context, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=SANDBOX_URI, name="sandbox", title="A sandbox",
            description="One sandbox's state, template, metadata and end time, as JSON.",
            mime_type=JSON_TYPE)])

    async def read_resource(ctx: Context, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        uri = str(params.uri)
        tools = tools_for(ctx)
        if uri == LIST_URI:
            body: Any = [i.to_json() for i in await _resource_call(tools.sandboxes())]
        elif uri.startswith(LIST_URI + "/") and uri.count("/") == 3:
            sandbox_id = uri.removeprefix(LIST_URI + "/")
            body = (await _resource_call(tools.sandbox(sandbox_id))).to_json()
        else:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"no resource {uri!r}: the resources are {LIST_URI} and "
                                   f"{SANDBOX_URI}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, text=json.dumps(body, indent=2), mime_type=JSON_TYPE)])

    return Server(
        SERVER_NAME, version=__version__, title="Bac sandboxes", instructions=INSTRUCTIONS,
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
        on_list_resource_templates=list_templates, on_read_resource=read_resource)


async def _resource_call(pending: Awaitable[T]) -> T:
    """A resource's SDK call; its failure is the client's error, in one sentence."""
    try:
        return await pending
    except SandboxError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from exc


async def serve_stdio(**opts: Unpack[ConnectionOpts]) -> None:
    """Serve MCP on stdin/stdout until the client closes them (what ``bac mcp`` runs)."""
    tools = SandboxTools(**opts)
    server = build_server(lambda ctx: tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


# -- streamable HTTP ------------------------------------------------------------------------

Authenticate = Callable[[str], Awaitable[bool]]


def api_key_of(headers: Any) -> str | None:
    """The API key a request carries: ``X-API-KEY``, else ``Authorization: Bearer``."""
    key = headers.get("x-api-key")
    if key:
        return str(key)
    scheme, _, token = str(headers.get("authorization") or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class HttpEndpoint:
    """MCP over streamable HTTP (stateless: every request stands alone), as an ASGI app.

    ``authenticate`` says whether a key is valid; a request without one or with a wrong
    one is answered 401 (JSON ``{"code", "message"}``, as the REST API answers) before the
    MCP layer reads it. The tools reach the API at ``api_url`` with the request's key.
    Run the app inside :meth:`running` (its sessions' task group)."""

    def __init__(self, api_url: str, authenticate: Authenticate) -> None:
        self._api_url = api_url
        self._authenticate = authenticate
        self._manager = StreamableHTTPSessionManager(
            app=build_server(self._tools_for), stateless=True)

    def _tools_for(self, ctx: Context) -> SandboxTools:
        key = api_key_of(ctx.request.headers) if ctx.request is not None else None
        if key is None:  # checked in __call__; never the server's own environment's key
            raise MCPError(code=types.INVALID_REQUEST, message="no API key in the request")
        return SandboxTools(api_key=key, api_url=self._api_url, sandbox_url=self._api_url)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        key = api_key_of(headers)
        if key is None or not await self._authenticate(key):
            message = ("missing API key: send it as X-API-KEY or Authorization: Bearer"
                       if key is None else "invalid API key")
            await _refuse(send, 401, message)
            return
        await self._manager.handle_request(scope, receive, send)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"code": status, "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b"Bearer")]})
    await send({"type": "http.response.body", "body": body})
