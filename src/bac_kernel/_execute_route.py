"""`POST /execute`: run code in a context and stream its output as NDJSON.

A raw ASGI endpoint rather than a Starlette response class, because it must watch for the
client's disconnect *while* the kernel is silent: a disconnect (an SDK timeout, a killed
client) interrupts the kernel at once instead of at the next line written. While nothing
else is sent, a keepalive line goes out every `KEEPALIVE_INTERVAL` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from bac_kernel import _outputs
from bac_kernel._cell import Cell
from bac_kernel._contexts import Context, ContextRegistry
from bac_kernel._errors import BadRequestError, KernelServerError
from bac_kernel._languages import check_env_names

KEEPALIVE_INTERVAL = 5.0
MAX_BODY = 64 * 1024 * 1024


class _Disconnected(Exception):
    """The client went away before the whole request body arrived."""


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise BadRequestError(f"request body larger than {MAX_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _parse(body: bytes) -> dict[str, Any]:
    try:
        request = json.loads(body)
    except ValueError as exc:
        raise BadRequestError(f"request body is not JSON: {exc}") from exc
    if not isinstance(request, dict):
        raise BadRequestError("request body must be a JSON object")
    if not isinstance(request.get("code"), str):
        raise BadRequestError("'code' must be a string")
    for key in ("context_id", "language"):
        if request.get(key) is not None and not isinstance(request[key], str):
            raise BadRequestError(f"{key!r} must be a string or null")
    if request.get("context_id") and request.get("language"):
        raise BadRequestError("give either 'context_id' or 'language', not both")
    env_vars = request.get("env_vars") or {}
    if not isinstance(env_vars, dict) or not all(isinstance(v, str) for v in env_vars.values()):
        raise BadRequestError("'env_vars' must be an object of string values")
    check_env_names(list(env_vars))
    request["env_vars"] = env_vars
    return request


class ExecuteEndpoint:
    """The ASGI app mounted at `POST /execute`."""

    def __init__(self, registry: ContextRegistry) -> None:
        self._registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            await PlainTextResponse("Method Not Allowed", 405)(scope, receive, send)
            return
        try:
            request = _parse(await _read_body(receive))
            context = await self._context(request)
        except _Disconnected:
            return
        except KernelServerError as exc:
            await PlainTextResponse(str(exc), exc.status_code)(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        token = headers.get(b"x-access-token", b"").decode("latin-1") or None
        cell = Cell(request["code"], request["env_vars"], token)
        self._registry.spawn(context.execute(cell))
        watcher = asyncio.create_task(_watch_disconnect(receive, cell))
        try:
            await _stream(send, cell)
        except OSError:  # uvicorn's ClientDisconnected: the peer closed mid-write
            cell.abandon()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _context(self, request: dict[str, Any]) -> Context:
        context_id = request.get("context_id")
        if context_id:
            return self._registry.get(context_id)
        context = await self._registry.default(request.get("language"))
        # A listed default context starts its kernel on first use: one that cannot start
        # is this request's 500, before the stream begins, as for any default context.
        await context.start()
        return context


async def _watch_disconnect(receive: Receive, cell: Cell) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            cell.abandon()
            return


async def _stream(send: Send, cell: Cell) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/x-ndjson")],
        }
    )
    while True:
        try:
            event = await asyncio.wait_for(cell.lines.get(), KEEPALIVE_INTERVAL)
        except TimeoutError:
            if cell.abandoned:
                return
            await _body(send, _outputs.KEEPALIVE, more=True)
            continue
        # Lines that are already queued go out in one write: a short cell's whole
        # answer is then a single chunk instead of one syscall per line.
        chunk = [_outputs.encode(event)]
        last = event is _outputs.END
        while not last and not cell.lines.empty():
            event = cell.lines.get_nowait()
            chunk.append(_outputs.encode(event))
            last = event is _outputs.END
        await _body(send, b"".join(chunk), more=not last)
        if last:
            return


async def _body(send: Send, chunk: bytes, *, more: bool) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": more})
