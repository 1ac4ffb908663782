"""A sandbox's network: its configuration on create (``NetworkConfig``), ``PUT
/sandboxes/{id}/network`` (replace the egress policy, 204) and the Bac extension ``GET
/sandboxes/{id}/network`` (policy, traffic counters, recent destinations)."""

from __future__ import annotations

from typing import Any

from pydantic import StrictBool, StrictInt, StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.body import Strict, read_model
from bac_server.api.context import plane, sandbox_id, settings, team
from bac_server.api.views import rfc3339_unix
from bac_server.control import InvalidRequest, NetworkUpdate


class NetworkConfig(Strict):
    """``network`` of a create body."""

    allowPublicTraffic: StrictBool | None = None
    allowOut: list[StrictStr] | None = None
    denyOut: list[StrictStr] | None = None
    dnsServers: list[StrictStr] | None = None
    egressProxy: dict[str, Any] | None = None
    maskRequestHost: StrictStr | None = None
    httpsPorts: list[StrictInt] | None = None
    rules: dict[str, Any] | None = None


class NetworkUpdateBody(Strict):
    """``PUT /sandboxes/{id}/network``: replaces the egress configuration."""

    allowOut: list[StrictStr] | None = None
    denyOut: list[StrictStr] | None = None
    dnsServers: list[StrictStr] | None = None
    egressProxy: dict[str, Any] | None = None
    rules: dict[str, Any] | None = None
    allow_internet_access: StrictBool | None = None


# Accepted on the wire but not implemented: refusing them beats silently not applying them.
_UNSUPPORTED = {
    "egressProxy": "egress proxies are not supported by this server",
    "maskRequestHost": "masking the request host is not supported by this server",
    "httpsPorts": "HTTPS to sandbox ports is not supported by this server",
}


def refuse_unsupported_network(given: dict[str, Any], prefix: str) -> None:
    for key, why in _UNSUPPORTED.items():
        if given.get(key) not in (None, [], {}):
            raise InvalidRequest(f"{prefix}.{key}: {why}")


async def update_network(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, NetworkUpdateBody, settings(request).max_body_bytes)
    refuse_unsupported_network(body.model_dump(exclude_none=True), "network")
    await plane(request).network.update(caller, sandbox_id(request), NetworkUpdate(
        body.allowOut, body.denyOut, body.dnsServers, body.allow_internet_access, body.rules))
    return Response(status_code=204, headers={"Should-Retry": "false"})


async def network_usage(request: Request) -> Response:
    caller = await team(request)
    sbx, usage = await plane(request).network.usage(caller, sandbox_id(request))
    network = sbx.network or {}
    return JSONResponse({
        "allowOut": list(network.get("allowOut") or []),
        "denyOut": list(network.get("denyOut") or []),
        "dnsServers": list(network.get("dnsServers") or []),
        "allowInternetAccess": sbx.allow_internet_access is not False,
        "traffic": {
            "internetBytesOut": usage.internet_bytes_out,
            "internetBytesIn": usage.internet_bytes_in,
            "totalBytesOut": usage.total_bytes_out,
            "totalBytesIn": usage.total_bytes_in,
        },
        "destinations": [
            {"name": d.name, "address": d.address or None, "port": d.port,
             "protocol": d.protocol, "allowed": d.allowed, "count": d.count,
             "lastSeen": rfc3339_unix(d.last_seen)}
            for d in usage.destinations
        ],
    })
