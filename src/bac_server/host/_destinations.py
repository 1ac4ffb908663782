"""Which remote destinations a server-side connection may go to: none on this machine or
on a private network, unless the operator allows it.

The host connects on a user's behalf in two places: a build's FROM registry (skopeo) and a
webhook's URL. Pointed at ``127.0.0.1:<port>``, a private address or a name resolving to
one, either would have the host reach what listens there. :class:`Destinations` refuses,
before any connection: loopback, private (RFC 1918, ULA), link-local, CGNAT, multicast,
reserved and the other non-global ranges, the host's own addresses and ranges the caller
names (the sandboxes' address pool). Operators allow more by name (``host`` for any port,
``host:port`` for one) or by CIDR (every address the name resolves to must lie in one).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyroute2 import IPRoute

from ._nftables import INFRA_DENY

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAME = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*"
                   r"(?::[0-9]{1,5})?")
_RESOLVE_TIMEOUT_S = 10.0


class UnresolvedName(OSError):
    """The destination's name did not resolve (in time)."""


def split_host(host: str) -> tuple[str, int | None]:
    """``host[:port]`` (``[v6]:port`` too) as the name and the port, if any."""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return name, int(rest[1:]) if rest.startswith(":") else None
    name, _, port = host.partition(":")
    return name, int(port) if port else None


def host_addresses() -> set[Address]:
    """Every address configured on this host's interfaces."""
    with IPRoute() as ipr:
        found = set()
        for addr in ipr.get_addr():
            local = addr.get_attr("IFA_LOCAL") or addr.get_attr("IFA_ADDRESS")
            if local:
                found.add(ipaddress.ip_address(local.split("%")[0]))
    return found


async def resolve(name: str, port: int) -> set[Address]:
    """Every address ``name`` resolves to (an address is itself); ``UnresolvedName``."""
    try:
        return {ipaddress.ip_address(name)}
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        found = await asyncio.wait_for(
            loop.getaddrinfo(name, port, type=socket.SOCK_STREAM), _RESOLVE_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise UnresolvedName(name) from exc
    return {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found}


@dataclass(frozen=True)
class Destinations:
    """The destinations allowed beyond the public internet."""

    hosts: frozenset[str] = frozenset()  # lower-case ``name`` or ``name:port``
    networks: tuple[Network, ...] = ()
    # Refused even where global: the sandboxes' address pool.
    refused: tuple[Network, ...] = field(default=())

    @classmethod
    def parse(cls, text: str, refused: Sequence[str] = ()) -> Destinations:
        """Comma-separated ``host``, ``host:port`` and CIDR entries; raises ValueError
        naming a bad one."""
        hosts, networks = set(), []
        for entry in filter(None, (e.strip().lower() for e in text.split(","))):
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if not _NAME.fullmatch(entry):
                raise ValueError(f"{entry!r} is neither a host[:port] nor a CIDR")
            hosts.add(entry)
        return cls(frozenset(hosts), tuple(networks),
                   tuple(ipaddress.ip_network(c, strict=False) for c in refused))

    def with_host(self, host: str | None) -> Destinations:
        """These rules plus ``host`` allowed."""
        if not host:
            return self
        return Destinations(self.hosts | {host.lower()}, self.networks, self.refused)

    def allowed_name(self, name: str, port: int | None) -> bool:
        name = name.lower()
        return name in self.hosts or (port is not None and f"{name}:{port}" in self.hosts)

    def refusal(self, address: Address, own: set[Address]) -> str | None:
        """Why ``address`` may not be connected to, or None."""
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

    async def first_refusal(self, addresses: set[Address]) -> tuple[Address, str] | None:
        """The first of ``addresses`` that is refused, and why; None when all may be used."""
        own = await asyncio.to_thread(host_addresses)
        for address in sorted(addresses, key=str):
            reason = self.refusal(address, own)
            if reason is not None:
                return address, reason
        return None
