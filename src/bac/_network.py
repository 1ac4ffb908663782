"""Sandbox network settings on the wire: the egress policy and the usage report.

Accepts E2B's option names (``allow_out``, ``deny_out``, ``dns_servers``,
``allow_public_traffic``) and sends the wire keys; ``update`` replaces the whole egress
policy (what it leaves out is cleared), as E2B's ``update_network`` does.
"""

from __future__ import annotations

from typing import Any, TypedDict

from bac import _errors as e
from bac._api import ApiClient
from bac._lifecycle import sandbox_path


class NetworkOpts(TypedDict, total=False):
    allow_out: list[str]  # addresses, CIDRs or domains (``*.example.com``), ``:port`` optional
    deny_out: list[str]
    dns_servers: list[str]
    allow_public_traffic: bool  # False: other ports than envd's need the traffic token


_WIRE = {"allow_out": "allowOut", "deny_out": "denyOut", "dns_servers": "dnsServers",
         "allow_public_traffic": "allowPublicTraffic"}


def wire_network(network: NetworkOpts | dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(network) - set(_WIRE))
    if unknown:
        raise e.InvalidArgumentError(f"unknown network option {unknown[0]!r}")
    return {_WIRE[key]: value for key, value in network.items()}


async def update(api: ApiClient, sandbox_id: str, network: NetworkOpts,
                 allow_internet_access: bool | None) -> None:
    body = wire_network({k: v for k, v in network.items() if k != "allow_public_traffic"})
    if allow_internet_access is not None:
        body["allow_internet_access"] = allow_internet_access
    await api.request("PUT", sandbox_path(sandbox_id, "/network"), json=body, ok=(200, 204),
                      not_found=e.SandboxNotFoundError)


async def usage(api: ApiClient, sandbox_id: str) -> dict[str, Any]:
    """Policy, traffic counters and recent destinations (``GET .../network``)."""
    found: dict[str, Any] = await api.json("GET", sandbox_path(sandbox_id, "/network"),
                                           not_found=e.SandboxNotFoundError)
    return found
