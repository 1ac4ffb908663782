"""`/contexts` (create, list, remove, restart) and `/health`.

Errors answer as plain text with the status of the error class, as the E2B
code-interpreter SDK expects (it shows the body in its exception).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from bac_kernel._contexts import ContextRegistry
from bac_kernel._errors import BadRequestError, KernelServerError

Handler = Callable[[Request], Awaitable[Response]]


def _errors_as_text(handler: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except KernelServerError as exc:
            return PlainTextResponse(str(exc), exc.status_code)

    return wrapped


def _registry(request: Request) -> ContextRegistry:
    registry: ContextRegistry = request.app.state.registry
    return registry


async def _body(request: Request) -> dict[str, object]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise BadRequestError(f"request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequestError("request body must be a JSON object")
    return body


@_errors_as_text
async def create_context(request: Request) -> Response:
    body = await _body(request)
    language, cwd = body.get("language"), body.get("cwd")
    if language is not None and not isinstance(language, str):
        raise BadRequestError("'language' must be a string")
    if cwd is not None and not isinstance(cwd, str):
        raise BadRequestError("'cwd' must be a string")
    context = await _registry(request).create(language or None, cwd or None)
    return JSONResponse(context.describe())


@_errors_as_text
async def list_contexts(request: Request) -> Response:
    return JSONResponse(_registry(request).describe_all())


@_errors_as_text
async def remove_context(request: Request) -> Response:
    await _registry(request).remove(request.path_params["context_id"])
    return Response(status_code=204)


@_errors_as_text
async def restart_context(request: Request) -> Response:
    await _registry(request).restart(request.path_params["context_id"])
    return JSONResponse({"status": "restarted"})


@_errors_as_text
async def health(request: Request) -> Response:
    """``OK``; with ``?kernel=LANGUAGE`` (Bac's own), once that language's default context
    has started its kernel: what the template's warm-up waits for before its start
    snapshot, so no sandbox restored from it waits for a kernel, and nothing runs in it."""
    language = request.query_params.get("kernel")
    if language:
        await (await _registry(request).default(language)).start()
    return JSONResponse("OK")
