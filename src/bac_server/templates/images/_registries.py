"""Which registries a build may pull FROM: none on this machine or on a private network,
unless the operator allows it.

skopeo runs as host root, so ``FROM 127.0.0.1:<port>/x`` (or a private address, or a
name resolving to one) would have the host connect to whatever listens there, and the
error would tell the build what answered. Before skopeo is run the registry's name is
resolved (every address it has) and each address is checked: loopback, private (RFC
1918, ULA), link-local, CGNAT, multicast, reserved and the other non-global ranges, the
host's own addresses and the sandboxes' address pool are refused (``FORBIDDEN``), with
no connection made and a message that says only what was refused and why.

The operator allows more with ``BAC_REGISTRY_ALLOW`` (``RegistryAccess.parse``):
comma-separated registry names (``host`` for any port, ``host:port`` for one) and CIDRs
(every address the name resolves to must lie in one). The registry mirror
(``BAC_REGISTRY_MIRROR``) is the operator's choice too, so it is allowed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyroute2 import IPRoute

from bac_server.host import INFRA_DENY

from ._model import ImageError, ImageErrorKind
from ._refs import RegistryImage

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAME = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*"
                   r"(?::[0-9]{1,5})?")
_RESOLVE_TIMEOUT_S = 10.0


def _split(host: str) -> tuple[str, int | None]:
    """``host[:port]`` (``[v6]:port`` too) as the name and the port, if any."""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return name, int(rest[1:]) if rest.startswith(":") else None
    name, _, port = host.partition(":")
    return name, int(port) if port else None


def _host_addresses() -> set[Address]:
    with IPRoute() as ipr:
        found = set()
        for addr in ipr.get_addr():
            local = addr.get_attr("IFA_LOCAL") or addr.get_attr("IFA_ADDRESS")
            if local:
                found.add(ipaddress.ip_address(local.split("%")[0]))
    return found


@dataclass(frozen=True)
class RegistryAccess:
    """The registries a build may reach beyond the public internet."""

    hosts: frozenset[str] = frozenset()  # lower-case ``name`` or ``name:port``
    networks: tuple[Network, ...] = ()
    # Refused even where global: the sandboxes' address pool.
    refused: tuple[Network, ...] = field(default=())

    @classmethod
    def parse(cls, text: str, refused: Sequence[str] = ()) -> RegistryAccess:
        """``BAC_REGISTRY_ALLOW``'s entries; raises ValueError naming a bad one."""
        hosts, networks = set(), []
        for entry in filter(None, (e.strip().lower() for e in text.split(","))):
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if not _NAME.fullmatch(entry):
                raise ValueError(f"{entry!r} is neither a registry host[:port] nor a CIDR")
            hosts.add(entry)
        return cls(frozenset(hosts), tuple(networks),
                   tuple(ipaddress.ip_network(c, strict=False) for c in refused))

    def with_host(self, host: str | None) -> RegistryAccess:
        """These rules plus ``host`` (the operator's mirror) allowed."""
        if not host:
            return self
        return RegistryAccess(self.hosts | {host.lower()}, self.networks, self.refused)

    def _allowed_name(self, name: str, port: int | None) -> bool:
        return name in self.hosts or (port is not None and f"{name}:{port}" in self.hosts)

    def _refusal(self, address: Address, own: set[Address]) -> str | None:
        """Why ``address`` may not be a registry's, or None."""
        if any(address in net for net in self.networks):
            return None
        plain = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        checked = plain or address
        if checked.is_loopback:
            return "a loopback address"
        if checked in own:
            return "an address of this host"
        if any(checked in net for net in self.refused):
            return "in the sandboxes' address pool"
        if not checked.is_global or checked.is_multicast or any(
                checked in ipaddress.ip_network(c) for c in INFRA_DENY
                if isinstance(checked, ipaddress.IPv4Address)):
            return "a private, link-local or reserved address"
        return None

    async def check(self, image: RegistryImage, what: str) -> None:
        """Raise ImageError (FORBIDDEN) unless every address of ``image``'s registry may
        be reached; nothing is sent to the registry."""
        name, port = _split(image.host.lower())
        if self._allowed_name(name, port):
            return
        try:
            addresses = {ipaddress.ip_address(name)}
        except ValueError:
            addresses = await _resolve(name, port or 443, image.host, what)
        own = await asyncio.to_thread(_host_addresses)
        for address in sorted(addresses, key=str):
            reason = self._refusal(address, own)
            if reason is not None:
                # SECURITY: refused before any connection; the message says only what the
                # server itself decided, nothing a remote could have answered.
                raise ImageError(
                    f"{what}: registry {image.host} is refused: {address} is {reason}; "
                    "an operator may allow it with BAC_REGISTRY_ALLOW", ImageErrorKind.FORBIDDEN)


async def _resolve(name: str, port: int, host: str, what: str) -> set[Address]:
    loop = asyncio.get_running_loop()
    try:
        found = await asyncio.wait_for(
            loop.getaddrinfo(name, port, type=socket.SOCK_STREAM), _RESOLVE_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise ImageError(f"{what}: registry {host} unreachable: its name does not resolve",
                         ImageErrorKind.UNREACHABLE) from exc
    return {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found}
