"""A sandbox's egress policy as data: what it may reach, parsed from E2B's wire lists.

Entries follow E2B's format: an IPv4 address, a CIDR, or a domain pattern (``example.com``,
``*.example.com``, ``*``), each optionally followed by ``:port`` or ``:low-high``. Matching
follows E2B too: an allow entry that matches wins, then a deny entry, then the default
(allowed, unless internet access is off, which acts like denying ``0.0.0.0/0``). Ranges
that belong to the host's infrastructure are denied before any of this (see the backend).

Domain entries are enforced by name: the sandbox's resolver only answers allowed names,
and the addresses it answers with become reachable for as long as the answer lives.

Errors::

    PolicyError      an entry is malformed; ``field`` and ``index`` name it
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

ALL_TRAFFIC = "0.0.0.0/0"
MAX_ENTRIES = 500
MAX_DNS_SERVERS = 10
MAX_DOMAIN_PORT_RANGES = 16
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


class PolicyError(ValueError):
    """One entry of a policy list is not valid."""

    def __init__(self, where: str, entry: object, why: str) -> None:
        super().__init__(f"{where}: {entry!r} {why}")
        self.where = where


class RuleKind(enum.Enum):
    CIDR = "cidr"
    DOMAIN = "domain"


@dataclass(frozen=True)
class EgressRule:
    kind: RuleKind
    value: str  # normalised CIDR ("1.2.3.0/24") or lower-case pattern ("*.example.com")
    ports: tuple[int, int] | None = None  # inclusive range; None = every port

    def __str__(self) -> str:
        if self.ports is None:
            return self.value
        low, high = self.ports
        return f"{self.value}:{low}" if low == high else f"{self.value}:{low}-{high}"


@dataclass(frozen=True)
class EgressPolicy:
    """Internet on and no rules (the default) means: everything public is reachable."""

    internet: bool = True
    allow: tuple[EgressRule, ...] = ()
    deny: tuple[EgressRule, ...] = ()
    # Resolvers opened on port 53, UDP and TCP (E2B's ``dnsServers``), for sandboxes
    # that use their own; only with domain rules, as E2B does.
    dns_servers: tuple[str, ...] = ()

    @property
    def denies_all(self) -> bool:
        """True when anything not explicitly allowed is denied (allow-list mode)."""
        return not self.internet or any(
            r.kind is RuleKind.CIDR and r.value == ALL_TRAFFIC and r.ports is None
            for r in self.deny)

    def allow_domains(self) -> list[EgressRule]:
        return [r for r in self.allow if r.kind is RuleKind.DOMAIN]

    def deny_domains(self) -> list[EgressRule]:
        return [r for r in self.deny if r.kind is RuleKind.DOMAIN]

    def name_verdict(self, name: str) -> bool | None:
        """True: an allow pattern names it; False: a deny pattern does, or everything
        not allowed is denied; None: no rule is about this name (open)."""
        if any(domain_matches(r.value, name) for r in self.allow_domains()):
            return True
        if any(domain_matches(r.value, name) for r in self.deny_domains()):
            return False
        return False if self.denies_all else None

    def to_wire(self) -> dict[str, object]:
        return {"allowOut": [str(r) for r in self.allow], "denyOut": [str(r) for r in self.deny],
                "dnsServers": list(self.dns_servers), "allowInternetAccess": self.internet}


def domain_matches(pattern: str, name: str) -> bool:
    """E2B's matching: exact (case-insensitive), ``*`` for all, ``*.x`` for names below x."""
    name = name.lower().rstrip(".")
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        return name.endswith(pattern[1:])
    return name == pattern


def _ports(raw: str) -> tuple[int, int]:
    low_raw, dash, high_raw = raw.partition("-")
    values = (low_raw, high_raw) if dash else (low_raw, low_raw)
    if not all(v.isdigit() and len(v) <= 5 for v in values):
        raise ValueError("has an invalid port")
    low, high = int(values[0]), int(values[1])
    if not (1 <= low <= high <= 65535):
        raise ValueError("has a port outside 1-65535 or a reversed range")
    return low, high


def _domain(host: str) -> str:
    name = host.lower().rstrip(".")
    if name == "*":
        return name
    body = name[2:] if name.startswith("*.") else name
    labels = body.split(".")
    if len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValueError("is not a valid IPv4 address, CIDR or domain pattern")
    if labels[-1].isdigit():
        raise ValueError("is not a valid IPv4 address or CIDR")
    return name


def parse_rule(entry: object) -> EgressRule:
    """One wire entry; raises ValueError with the reason (the caller names the entry)."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError("is not a non-empty string")
    text = entry.strip()
    if text.count(":") > 1 or text.startswith("["):
        raise ValueError("is an IPv6 entry; sandboxes have no IPv6 egress")
    host, colon, port_text = text.partition(":")
    ports = _ports(port_text) if colon and port_text else None
    try:
        network = ipaddress.IPv4Network(host, strict=False)
    except ValueError:
        if re.fullmatch(r"[0-9./]+", host):
            raise ValueError("is not a valid IPv4 address or CIDR") from None
        return EgressRule(RuleKind.DOMAIN, _domain(host), ports)
    if network.network_address.is_unspecified and network.prefixlen != 0:
        raise ValueError("names the unspecified address")
    return EgressRule(RuleKind.CIDR, str(network), ports)


def _rules(entries: Sequence[object] | None, where: str) -> tuple[EgressRule, ...]:
    items = list(entries or [])
    if len(items) > MAX_ENTRIES:
        raise PolicyError(where, f"{len(items)} entries", f"exceeds the limit of {MAX_ENTRIES}")
    rules: list[EgressRule] = []
    for index, entry in enumerate(items):
        try:
            rules.append(parse_rule(entry))
        except ValueError as exc:
            raise PolicyError(f"{where}[{index}]", entry, str(exc)) from exc
    return tuple(dict.fromkeys(rules))


def _dns_servers(entries: Sequence[object] | None, where: str) -> tuple[str, ...]:
    items = list(entries or [])
    if len(items) > MAX_DNS_SERVERS:
        raise PolicyError(where, f"{len(items)} entries", f"exceeds the limit of "
                          f"{MAX_DNS_SERVERS}")
    servers: list[str] = []
    for index, entry in enumerate(items):
        try:
            address = ipaddress.IPv4Address(entry if isinstance(entry, str) else "")
        except ValueError:
            raise PolicyError(f"{where}[{index}]", entry, "is not an IPv4 address") from None
        servers.append(str(address))
    return tuple(servers)


@dataclass(frozen=True)
class WirePolicy:
    """The policy fields as they arrive (E2B keys), before parsing."""

    allow_out: Sequence[object] | None = None
    deny_out: Sequence[object] | None = None
    dns_servers: Sequence[object] | None = None
    allow_internet_access: bool | None = None
    prefix: str = field(default="network")


def parse_policy(wire: WirePolicy) -> EgressPolicy:
    """Validate and normalise; raises PolicyError naming the first bad entry."""
    allow = _rules(wire.allow_out, f"{wire.prefix}.allowOut")
    deny = _rules(wire.deny_out, f"{wire.prefix}.denyOut")
    servers = _dns_servers(wire.dns_servers, f"{wire.prefix}.dnsServers")
    policy = EgressPolicy(internet=wire.allow_internet_access is not False, allow=allow,
                          deny=deny, dns_servers=servers)
    domains = policy.allow_domains()
    if domains and not policy.denies_all:
        index = policy.allow.index(domains[0])
        raise PolicyError(f"{wire.prefix}.allowOut[{index}]", str(domains[0]),
                          "is a domain: allowing domains needs '0.0.0.0/0' in denyOut "
                          "(or allow_internet_access false), as everything else is "
                          "allowed already")
    if len({r.ports for r in domains}) > MAX_DOMAIN_PORT_RANGES:
        raise PolicyError(f"{wire.prefix}.allowOut", "domain rules",
                          f"use more than {MAX_DOMAIN_PORT_RANGES} distinct port ranges")
    return policy


@dataclass(frozen=True)
class Destination:
    """One egress destination seen from a sandbox (bounded log, newest first)."""

    address: str
    port: int | None
    protocol: str  # "tcp", "udp", "icmp", "dns"
    allowed: bool
    count: int
    name: str | None = None
    last_seen: float = 0.0  # unix time


@dataclass(frozen=True)
class NetworkUsage:
    """Traffic counters of one sandbox and where it tried to go."""

    internet_bytes_out: int
    internet_bytes_in: int
    total_bytes_out: int  # everything on its interface, host-side traffic included
    total_bytes_in: int
    destinations: tuple[Destination, ...] = ()
