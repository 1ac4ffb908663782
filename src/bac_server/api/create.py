"""``POST /sandboxes`` (v1) and ``POST /v2/sandboxes``: create a sandbox, 201 ``Sandbox``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.body import read_model
from bac_server.api.context import plane, settings, team
from bac_server.api.models import NewSandbox
from bac_server.api.network import refuse_unsupported_network
from bac_server.control import CreateRequest, InvalidRequest, egress_policy


def _request(body: NewSandbox) -> CreateRequest:
    """Turn the wire body into the domain request, refusing what this server cannot honour."""
    if body.volumeMounts:
        raise InvalidRequest("volumeMounts: volumes are not supported by this server yet")
    if body.mcp is not None:
        raise InvalidRequest("mcp: the MCP gateway is not supported by this server yet")
    if body.iam is not None and (body.iam.model_extra or {}).get("tokens"):
        raise InvalidRequest("iam: identity tokens are not supported by this server yet")
    network = body.network
    if network is not None:
        refuse_unsupported_network(network.model_dump(exclude_none=True), "network")
    egress = egress_policy(
        None if network is None else network.allowOut,
        None if network is None else network.denyOut,
        None if network is None else network.dnsServers,
        body.allow_internet_access,
    )
    allow_public = True if network is None or network.allowPublicTraffic is None else (
        network.allowPublicTraffic
    )
    return CreateRequest(
        template=body.templateID,
        timeout_s=body.timeout,
        metadata=dict(body.metadata or {}),
        env_vars=dict(body.envVars or {}),
        cpu_count=body.cpuCount,
        memory_mb=body.memoryMB,
        allow_public_traffic=allow_public,
        network=None if network is None else network.model_dump(exclude_none=True),
        allow_internet_access=body.allow_internet_access,
        on_timeout="pause" if body.autoPause else "kill",
        pause_memory=body.autoPauseMemory is not False,
        auto_resume=body.autoResume is not None and body.autoResume.enabled,
        egress=egress,
    )


async def create_sandbox(request: Request) -> Response:
    caller = await team(request)
    conf = settings(request)
    body = await read_model(request, NewSandbox, conf.max_body_bytes)
    sbx = await plane(request).creator.create(caller, _request(body))
    return JSONResponse(
        views.sandbox(sbx, envd_version=conf.envd_version, domain=conf.domain), 201
    )
