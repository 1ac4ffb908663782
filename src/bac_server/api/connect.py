"""``POST /sandboxes/{id}/connect`` (v1) and ``POST /v2/sandboxes/{id}/connect``.

A running sandbox gets its end pushed out (never pulled in) and answers 200; a paused one is
resumed and answers 201 (``"memory": false`` — E2B ``on_resume="reboot"`` — starts it afresh
on its files instead of restoring its memory). ``POST /sandboxes/{id}/resume`` is the older
spelling of the second case; its ``autoPause`` sets what the next timeout does.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.body import read_model
from bac_server.api.context import plane, sandbox_id, settings, team
from bac_server.api.models import ConnectSandbox, ConnectSandboxV1, ResumeRequest
from bac_server.control import EventKind, Team


async def _connect(request: Request, caller: Team, timeout_s: int | None,
                   memory: bool | None) -> Response:
    conf = settings(request)
    control = plane(request)
    sid = sandbox_id(request)
    seconds = control.limits.default_timeout_s if timeout_s is None else timeout_s
    running = await control.lifecycle.extend(caller, sid, seconds, EventKind.CONNECTED)
    status = 200
    if not running:
        await control.lifecycle.resume(caller, sid, seconds, memory=memory is not False)
        status = 201
    sbx = control.registry.owned(caller, sid)
    return JSONResponse(
        views.sandbox(sbx, envd_version=conf.envd_version, domain=conf.domain), status
    )


async def connect_v2(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, ConnectSandbox, settings(request).max_body_bytes)
    return await _connect(request, caller, body.timeout, body.memory)


async def connect_v1(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, ConnectSandboxV1, settings(request).max_body_bytes)
    return await _connect(request, caller, body.timeout, body.memory)


async def resume(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, ResumeRequest, settings(request).max_body_bytes)
    conf = settings(request)
    control = plane(request)
    sid = sandbox_id(request)
    seconds = control.limits.default_timeout_s if body.timeout is None else body.timeout
    await control.lifecycle.resume(caller, sid, seconds, memory=body.memory is not False)
    sbx = control.registry.owned(caller, sid)
    if body.autoPause is not None:
        sbx.on_timeout = "pause" if body.autoPause else "kill"
        await control.sandbox_store.update_sandbox(sid, lifecycle=sbx.lifecycle())
    return JSONResponse(
        views.sandbox(sbx, envd_version=conf.envd_version, domain=conf.domain), 201
    )
