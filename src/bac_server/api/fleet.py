"""The operator's kill switch: ``POST /admin/fleet/pause``, ``/admin/fleet/kill`` and
``/admin/fleet/release``, each with a JSON selector (``{"all": true}``, or any of
``team``, ``metadata``, ``template``).

These are admin routes: they need the operator's token (``BAC_ADMIN_TOKEN``) as
``Authorization: Bearer <token>``, never a team's API key (403 with one, 401 with no token
or a wrong one, 403 while the server has no admin token: the routes are off). The token is
compared in constant time.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse

from bac_server.api.body import Strict, read_model
from bac_server.api.context import plane, settings
from bac_server.api.errors import Forbidden
from bac_server.control import Selector, SwitchResult, Unauthenticated

_Text = Annotated[StrictStr, Field(min_length=1, max_length=256)]


class SelectorBody(Strict):
    all: StrictBool = False
    team: _Text | None = None
    metadata: Annotated[dict[_Text, StrictStr], Field(max_length=64)] | None = None
    template: _Text | None = None


def require_operator(request: Request) -> None:
    """Let the request through only with the operator's token; raise otherwise."""
    expected = settings(request).admin_token
    if not expected:
        raise Forbidden("the admin API is off: the server has no BAC_ADMIN_TOKEN")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        if request.headers.get("x-api-key"):
            raise Forbidden("a team's API key cannot use the admin API: send the operator's "
                            "token (BAC_ADMIN_TOKEN) as Authorization: Bearer <token>")
        raise Unauthenticated("the admin API needs the operator's token (BAC_ADMIN_TOKEN) "
                              "as Authorization: Bearer <token>")
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise Unauthenticated("invalid admin token")


async def _selector(request: Request) -> Selector:
    body = await read_model(request, SelectorBody, settings(request).max_body_bytes)
    return Selector(everything=body.all, team=body.team, metadata=dict(body.metadata or {}),
                    template=body.template)


def _answer(result: SwitchResult) -> JSONResponse:
    view: dict[str, Any] = {
        "action": result.action, "count": len(result.sandbox_ids),
        "sandboxIDs": result.sandbox_ids,
        "failed": [{"sandboxID": k, "message": v} for k, v in sorted(result.failed.items())],
        "frozenMs": result.frozen_ms}
    if result.mode is not None:
        view["mode"] = result.mode
    return JSONResponse(view)


async def pause(request: Request) -> JSONResponse:
    require_operator(request)
    return _answer(await plane(request).kill_switch.pause(await _selector(request)))


async def kill(request: Request) -> JSONResponse:
    require_operator(request)
    return _answer(await plane(request).kill_switch.kill(await _selector(request)))


async def release(request: Request) -> JSONResponse:
    require_operator(request)
    return _answer(await plane(request).kill_switch.release(await _selector(request)))
