"""E2B's secrets: ``POST /secrets`` (201), ``GET /secrets`` (oldest first, ``limit`` and
``nextToken``, ``X-Next-Token`` when more follow), ``GET /secrets/{id or name}``,
``POST /secrets/{id or name}`` (a new version, 200), ``DELETE /secrets/{id or name}``
(204). Every answer is the secret's metadata (``Secret``); no answer carries a value.
"""

from __future__ import annotations

from typing import Any

from pydantic import StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.body import Strict, read_model
from bac_server.api.context import plane, settings, team
from bac_server.api.query import int_param
from bac_server.api.views import rfc3339
from bac_server.control import NotSupported
from bac_server.control.secrets import MAX_LIMIT, Secrets
from bac_server.store import SecretRecord


class NewSecret(Strict):
    name: StrictStr
    value: StrictStr
    metadata: dict[StrictStr, StrictStr] | None = None


class SecretUpdate(Strict):
    value: StrictStr
    metadata: dict[StrictStr, StrictStr] | None = None


def _secret(rec: SecretRecord) -> dict[str, Any]:
    """``Secret``."""
    return {"secretID": rec.secret_id, "name": rec.name, "currentVersion": rec.version,
            "metadata": dict(rec.metadata), "createdAt": rfc3339(rec.created_at),
            "updatedAt": rfc3339(rec.updated_at)}


def _service(request: Request) -> Secrets:
    service = plane(request).secrets
    if service is None:
        raise NotSupported("secrets are not enabled on this server")
    return service


def _ref(request: Request) -> str:
    value: str = request.path_params["secretID"]
    return value


async def create_secret(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, NewSecret, settings(request).max_body_bytes)
    rec = await _service(request).create(caller, body.name, body.value, body.metadata)
    return JSONResponse(_secret(rec), status_code=201)


async def list_secrets(request: Request) -> Response:
    caller = await team(request)
    limit = int_param(request.query_params, "limit", default=MAX_LIMIT, low=1, high=MAX_LIMIT)
    assert limit is not None
    page = await _service(request).list(caller, request.query_params.get("nextToken") or None,
                                        limit)
    headers = {"X-Next-Token": page.next_token} if page.next_token else {}
    return JSONResponse([_secret(r) for r in page.items], headers=headers)


async def get_secret(request: Request) -> Response:
    caller = await team(request)
    return JSONResponse(_secret(await _service(request).get(caller, _ref(request))))


async def update_secret(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, SecretUpdate, settings(request).max_body_bytes)
    rec = await _service(request).update(caller, _ref(request), body.value, body.metadata)
    return JSONResponse(_secret(rec))


async def delete_secret(request: Request) -> Response:
    caller = await team(request)
    await _service(request).delete(caller, _ref(request))
    return Response(status_code=204)
