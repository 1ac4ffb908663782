"""Sandbox networking in the control plane: egress policies from the wire, runtime
changes (``PUT /sandboxes/{id}/network``) and traffic usage.

A malformed entry is an ``InvalidRequest`` naming it (``network.allowOut[2]: '1.2.3.0/33'
is not a valid IPv4 address or CIDR``). An update replaces the whole egress
configuration, as E2B's does: what it leaves out is cleared.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bac_server.backends.base import Backend, NetworkControl
from bac_server.backends.egress import (
    EgressPolicy,
    NetworkUsage,
    PolicyError,
    WirePolicy,
    parse_policy,
)
from bac_server.store import SandboxStore

from ..errors import Conflict, InvalidRequest, NotSupported
from ..keys import Team
from ._events import EventKind, event
from ._registry import LiveSandbox, Registry
from ._states import SandboxState

_EGRESS_KEYS = ("allowOut", "denyOut", "dnsServers", "rules")


def egress_policy(allow_out: Sequence[object] | None, deny_out: Sequence[object] | None,
                  dns_servers: Sequence[object] | None, allow_internet_access: bool | None,
                  prefix: str = "network", *, rules: object = None,
                  team: str = "") -> EgressPolicy:
    """Parse the wire lists (and E2B's per-host ``rules``, whose secret placeholders name
    ``team``'s secrets); raises InvalidRequest naming the first bad entry."""
    try:
        return parse_policy(WirePolicy(allow_out, deny_out, dns_servers,
                                       allow_internet_access, prefix, rules, team))
    except PolicyError as exc:
        raise InvalidRequest(str(exc)) from exc


def policy_of(sbx: LiveSandbox) -> EgressPolicy:
    """The policy a sandbox was given (for backends that re-create it, e.g. from a
    checkpoint). Stored values were validated when they came in."""
    network = sbx.network or {}
    return egress_policy(network.get("allowOut"), network.get("denyOut"),
                         network.get("dnsServers"), sbx.allow_internet_access,
                         rules=network.get("rules"), team=sbx.team_id)


@dataclasses.dataclass(frozen=True)
class NetworkUpdate:
    allow_out: Sequence[object] | None = None
    deny_out: Sequence[object] | None = None
    dns_servers: Sequence[object] | None = None
    allow_internet_access: bool | None = None
    rules: object = None  # E2B's ``rules``: {host: [{"transform": {"headers": {...}}}]}


class NetworkService:
    def __init__(self, *, backend: Backend, sandbox_store: SandboxStore,
                 registry: Registry) -> None:
        self._backend = backend
        self._sandbox_store = sandbox_store
        self._registry = registry

    def _control(self) -> NetworkControl:
        if not isinstance(self._backend, NetworkControl):
            raise NotSupported(f"the {self._backend.name!r} backend cannot change a "
                               "sandbox's network while it runs")
        return self._backend

    async def update(self, team: Team, sandbox_id: str, update: NetworkUpdate) -> None:
        policy = egress_policy(update.allow_out, update.deny_out, update.dns_servers,
                               update.allow_internet_access, rules=update.rules,
                               team=team.team_id)
        backend = self._control()
        sbx = self._registry.owned(team, sandbox_id)
        async with sbx.lock:
            self._registry.owned(team, sandbox_id)
            if sbx.state not in (SandboxState.RUNNING, SandboxState.PAUSED):
                raise Conflict(f"sandbox {sandbox_id!r} is {sbx.state.value}")
            await backend.set_network(sandbox_id, policy)
            network: dict[str, Any] = {k: v for k, v in (sbx.network or {}).items()
                                       if k not in _EGRESS_KEYS}
            wire = policy.to_wire()
            network.update({k: wire[k] for k in _EGRESS_KEYS if wire[k]})
            sbx.network = network
            sbx.allow_internet_access = update.allow_internet_access
            await self._sandbox_store.update_sandbox(
                sandbox_id, network=network, allow_internet_access=policy.internet,
                event=event(sandbox_id, sbx.team_id, EventKind.NETWORK_UPDATED,
                            "egress policy replaced", allow_out=",".join(wire_list(wire,
                                                                                   "allowOut")),
                            deny_out=",".join(wire_list(wire, "denyOut"))))

    async def usage(self, team: Team, sandbox_id: str) -> tuple[LiveSandbox, NetworkUsage]:
        backend = self._control()
        sbx = self._registry.owned(team, sandbox_id)
        return sbx, await backend.network_usage(sandbox_id)


def wire_list(wire: dict[str, object], key: str) -> list[str]:
    value = wire.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []
