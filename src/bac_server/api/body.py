"""Reading request bodies: size limit, JSON syntax, then a strict pydantic model.

Each failure becomes a 400/413 whose message names the field or the limit, never a 500.

Every body model derives from :class:`Strict`: no coercion (``"60"`` is not a timeout,
``true`` is not a count), and an unknown key is rejected, because the models list every key
an official SDK sends, so an unknown one is a client bug worth reporting. Keys are exactly
as on the wire.
"""

from __future__ import annotations

import json
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError
from starlette.requests import Request

from bac_server.api.errors import BadRequest, PayloadTooLarge


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Open(BaseModel):
    # Nested configuration objects newer SDKs may grow keys in; kept as given.
    model_config = ConfigDict(extra="allow", strict=True)


Name = Annotated[StrictStr, Field(min_length=1, max_length=255)]

M = TypeVar("M", bound=BaseModel)


async def read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise BadRequest("Content-Length must be a non-negative integer")
        if int(declared) > max_bytes:
            raise PayloadTooLarge(f"request body is larger than the limit of {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"request body is larger than the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_model(request: Request, model: type[M], max_bytes: int) -> M:
    """Parse the body as ``model``; an empty body counts as ``{}``."""
    raw = await read_body(request, max_bytes)
    if not raw.strip():
        data: object = {}
    else:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"request body is not valid JSON: {_short(exc)}") from exc
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(describe(exc)) from exc


def describe(exc: ValidationError) -> str:
    """One readable line per problem: ``field.path: what is wrong``."""
    parts = []
    for err in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown field {where!r}")
        elif err["type"] == "missing":
            parts.append(f"missing required field {where!r}")
        else:
            parts.append(f"{where}: {err['msg']}")
    return "invalid request body: " + "; ".join(parts)


def _short(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)[:200]
