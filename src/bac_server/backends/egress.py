"""A sandbox's egress policy as data: what it may reach, parsed from E2B's wire lists.

Entries follow E2B's format: an IPv4 address, a CIDR, or a domain pattern (``example.com``,
``*.example.com``, ``*``), each optionally followed by ``:port`` or ``:low-high``. Matching
follows E2B too: an allow entry that matches wins, then a deny entry, then the default
(allowed, unless internet access is off, which acts like denying ``0.0.0.0/0``). Ranges
that belong to the host's infrastructure are denied before any of this (see the backend).

Domain entries are enforced by name: the sandbox's resolver only answers allowed names,
and the addresses it answers with become reachable for as long as the answer lives.

Per-host rules (E2B's ``rules``: ``{host: [{"transform": {"headers": {name: value}}}]}``)
set headers on the HTTP requests the sandbox sends to that host, where a value may name
a team secret as ``${e2b.secrets.<name>}``; the egress relay puts the value in on the
host, so it never enters the sandbox. A rule's host is a domain pattern as in allowOut,
and must be allowed by a domain entry of allowOut (only those connections pass the
relay); an address or CIDR is refused. The secrets a host's rules name are the ones
*scoped* to it (``HostRules.secrets``).

Errors::

    PolicyError      an entry is malformed; ``field`` and ``index`` name it
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

ALL_TRAFFIC = "0.0.0.0/0"
MAX_ENTRIES = 500
MAX_DNS_SERVERS = 10
MAX_DOMAIN_PORT_RANGES = 16
MAX_RULE_HOSTS = 64
MAX_RULES_PER_HOST = 16
MAX_RULE_HEADERS = 32
MAX_HEADER_VALUE = 8192
# What ``Secret.fill(name)`` makes; the name as the SDK allows it (no braces, no controls).
PLACEHOLDER = re.compile(r"\$\{e2b\.secrets\.([^{}\x00-\x1f\x7f-\x9f]+)\}")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
# Headers a transform may not set: routing and framing are the relay's.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection",
                               "upgrade", "te", "trailer", "keep-alive",
                               "proxy-connection"})
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


# (team id, secret names) -> the values of those the team has (absent names left out):
# what the egress relay resolves placeholders with (the store's, wired by the
# composition root).
SecretLookup = Callable[[str, frozenset[str]], Awaitable[dict[str, str]]]


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
class HostRules:
    """One host's transforms: the headers its requests get, in the order given (a later
    rule's header replaces an earlier one of the same name)."""

    host: str  # a domain pattern: "api.example.com", "*.example.com"
    headers: tuple[tuple[str, str], ...]

    @property
    def secrets(self) -> frozenset[str]:
        """The secrets scoped to this host: those its headers name."""
        return frozenset(n for _h, v in self.headers for n in PLACEHOLDER.findall(v))


@dataclass(frozen=True)
class EgressPolicy:
    """Internet on and no rules (the default) means: everything public is reachable."""

    internet: bool = True
    allow: tuple[EgressRule, ...] = ()
    deny: tuple[EgressRule, ...] = ()
    # Resolvers opened on port 53, UDP and TCP (E2B's ``dnsServers``), for sandboxes
    # that use their own; only with domain rules, as E2B does.
    dns_servers: tuple[str, ...] = ()
    rules: tuple[HostRules, ...] = ()
    # The team whose secrets the rules' placeholders name (set by the control plane).
    # Not part of what the policy *is*: two policies that let the same traffic out are
    # equal whoever owns them (a slot restored ahead under the default policy serves any
    # team's create that asks for the default).
    team: str = field(default="", compare=False)

    def rules_for(self, host: str) -> HostRules | None:
        """The rules of ``host``: an exact entry, else the longest ``*.`` pattern."""
        host = host.lower().rstrip(".")
        best: HostRules | None = None
        for rules in self.rules:
            if rules.host == host:
                return rules
            if domain_matches(rules.host, host) and (
                    best is None or len(rules.host) > len(best.host)):
                best = rules
        return best

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
                "dnsServers": list(self.dns_servers), "allowInternetAccess": self.internet,
                "rules": rules_to_wire(self.rules)}


def rules_to_wire(rules: tuple[HostRules, ...]) -> dict[str, list[dict[str, object]]]:
    """E2B's shape, one rule per host (its headers merged)."""
    return {r.host: [{"transform": {"headers": dict(r.headers)}}] for r in rules}


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


def _header_value(value: object, where: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_HEADER_VALUE or \
            re.search(r"[\x00-\x08\x0a-\x1f\x7f]", value):
        raise PolicyError(where, value if isinstance(value, str) else type(value).__name__,
                          f"is not a header value (a string of at most {MAX_HEADER_VALUE} "
                          "characters, no line breaks or control characters)")
    return value


def _host_rules(host: object, entries: object, where: str) -> HostRules:
    if not isinstance(host, str):
        raise PolicyError(where, host, "is not a host name")
    try:
        rule = parse_rule(host)
    except ValueError as exc:
        raise PolicyError(where, host, str(exc)) from exc
    if rule.kind is not RuleKind.DOMAIN or rule.ports is not None or rule.value == "*":
        raise PolicyError(where, host, "is not a host name or *.domain pattern: rules "
                          "transform HTTP requests by the host they name, not by address "
                          "or port")
    if not isinstance(entries, list) or len(entries) > MAX_RULES_PER_HOST:
        raise PolicyError(where, host, f"needs a list of at most {MAX_RULES_PER_HOST} rules")
    headers: dict[str, tuple[str, str]] = {}
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        if not isinstance(entry, dict) or set(entry) - {"transform"}:
            raise PolicyError(at, entry, "is not a rule ({'transform': {'headers': {...}}})")
        transform = entry.get("transform") or {}
        if not isinstance(transform, dict) or set(transform) - {"headers"}:
            raise PolicyError(f"{at}.transform", transform, "takes only 'headers'")
        given = transform.get("headers") or {}
        if not isinstance(given, dict):
            raise PolicyError(f"{at}.transform.headers", given, "is not an object")
        for name, value in given.items():
            if not isinstance(name, str) or not _TOKEN.match(name) or \
                    name.lower() in _RESERVED_HEADERS:
                raise PolicyError(f"{at}.transform.headers", name,
                                  "is not a header name a rule may set")
            headers[name.lower()] = (name, _header_value(value,
                                                         f"{at}.transform.headers.{name}"))
    if len(headers) > MAX_RULE_HEADERS:
        raise PolicyError(where, host, f"sets more than {MAX_RULE_HEADERS} headers")
    return HostRules(rule.value, tuple(headers.values()))


def _rules_of(given: object, where: str) -> tuple[HostRules, ...]:
    if given is None:
        return ()
    if not isinstance(given, dict):
        raise PolicyError(where, given, "is not an object of host: [rules]")
    if len(given) > MAX_RULE_HOSTS:
        raise PolicyError(where, f"{len(given)} hosts", f"exceeds the limit of "
                          f"{MAX_RULE_HOSTS}")
    found: dict[str, HostRules] = {}
    for host, entries in given.items():
        rules = _host_rules(host, entries, f"{where}[{host!r}]")
        if rules.host in found:
            raise PolicyError(f"{where}[{host!r}]", host, "is given twice")
        found[rules.host] = rules
    return tuple(found.values())


@dataclass(frozen=True)
class WirePolicy:
    """The policy fields as they arrive (E2B keys), before parsing."""

    allow_out: Sequence[object] | None = None
    deny_out: Sequence[object] | None = None
    dns_servers: Sequence[object] | None = None
    allow_internet_access: bool | None = None
    prefix: str = field(default="network")
    rules: object = None  # E2B's ``rules`` as sent
    team: str = ""


def parse_policy(wire: WirePolicy) -> EgressPolicy:
    """Validate and normalise; raises PolicyError naming the first bad entry."""
    allow = _rules(wire.allow_out, f"{wire.prefix}.allowOut")
    deny = _rules(wire.deny_out, f"{wire.prefix}.denyOut")
    servers = _dns_servers(wire.dns_servers, f"{wire.prefix}.dnsServers")
    rules = _rules_of(wire.rules, f"{wire.prefix}.rules")
    policy = EgressPolicy(internet=wire.allow_internet_access is not False, allow=allow,
                          deny=deny, dns_servers=servers, rules=rules, team=wire.team)
    domains = policy.allow_domains()
    for host_rules in rules:
        # Only connections to names a domain entry allows pass the relay that applies
        # rules; a rule no connection would meet is refused, not silently idle.
        probe = host_rules.host[2:] if host_rules.host.startswith("*.") else host_rules.host
        if not any(domain_matches(r.value, probe) or r.value == host_rules.host
                   for r in domains):
            raise PolicyError(f"{wire.prefix}.rules[{host_rules.host!r}]", host_rules.host,
                              "is not allowed by a domain entry of allowOut: a rule's "
                              "host must also be in allowOut (with 0.0.0.0/0 in denyOut)")
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
