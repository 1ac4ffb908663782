"""What the sandboxes' resolver answers and what the egress relay lets through.

Both decide with the sandbox's policy (``Egress`` keeps one ``SandboxEgress`` per
sandbox here, by address): the resolver answers only names the policy allows and pins
their addresses (``SandboxRules.pin``: one netlink batch, constant whatever the host
holds) before answering, so a connect right after resolving works; the relay checks the
host name a connection opens with where a domain rule applies. Both keep a bounded log of their
decisions, read back as destinations.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from bac_server.backends.egress import Destination, EgressPolicy, HostRules, domain_matches
from bac_server.host import INFRA_DENY

from . import _dns_answers as answers
from ._dns import Upstream
from ._relay_ca import RelayCa
from .nft import PinError, SandboxRules

_log = logging.getLogger(__name__)
_DNS_LOG = 256


@dataclass
class SandboxEgress:
    rules: SandboxRules
    state: Path
    policy: EgressPolicy
    dns_log: collections.deque[Destination] = field(
        default_factory=lambda: collections.deque(maxlen=_DNS_LOG))
    relayed_out: int = 0  # bytes through the host-name-checking relay (not forwarded)
    relayed_in: int = 0
    # The CA its trust store holds for the relay's TLS termination (made at hand-out,
    # ``Egress.relay_ca``; kept in memory only).
    ca: RelayCa | None = None


@dataclass(frozen=True)
class Ruled:
    """A host with rules, as one sandbox's relay sees it."""

    host: str
    rules: HostRules
    team: str
    ca: RelayCa | None
    # The addresses the sandbox's resolver answered for this host (a plain-HTTP request
    # gets its secrets only on a connection to one of them).
    answered: frozenset[str]


def _is_address(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


class NameChecks:
    """The resolver's and the relay's decisions; ``Egress`` hands them ``answer`` and
    ``decide``/``account``."""

    def __init__(self, upstream: Upstream, exempt: list[ipaddress.IPv4Network]) -> None:
        # The sandboxes by address (``Egress`` adds and removes them).
        self.by_address: dict[str, SandboxEgress] = {}
        self._upstream = upstream
        self._infra = [ipaddress.IPv4Network(c) for c in INFRA_DENY]
        self._exempt_nets = exempt

    def deny(self, networks: list[ipaddress.IPv4Network]) -> None:
        """Count ``networks`` as infrastructure too (never reached through the relay,
        never pinned)."""
        self._infra += networks

    def _is_infra(self, address: str) -> bool:
        ip = ipaddress.IPv4Address(address)
        return any(ip in net for net in self._infra) and \
            not any(ip in net for net in self._exempt_nets)

    # -- the host-name checking relay ---------------------------------------------------

    def decide(self, client: str, host: str | None, address: str, port: int,
               log: bool = True) -> bool:
        """Whether the relay lets a connection (or one of its HTTP requests) naming
        ``host`` through to ``address:port``; refusals are always logged."""
        entry = self.by_address.get(client)
        # SECURITY: the relay connects from the host, so it re-checks what the firewall
        # would have: never the infrastructure, whatever a resolver answered.
        if entry is None or self._is_infra(address):
            return False
        if host is None or _is_address(host):
            # No name in the opening: decided on the address, pinned for an allowed name.
            allowed = True
            host = next((d.name for d in entry.dns_log
                         if d.address == address and d.protocol == "dns"), None)
        else:
            allowed = any(domain_matches(r.value, host)
                          and (r.ports is None or r.ports[0] <= port <= r.ports[1])
                          for r in entry.policy.allow_domains())
        if log or not allowed:
            entry.dns_log.appendleft(Destination(address=address, port=port, protocol="tcp",
                                                 allowed=allowed, count=1, name=host,
                                                 last_seen=time.time()))
        return allowed

    def ruled(self, client: str, host: str) -> Ruled | None:
        """The rules of ``host`` for the sandbox at ``client``, None when it has none."""
        entry = self.by_address.get(client)
        if entry is None:
            return None
        rules = entry.policy.rules_for(host)
        if rules is None:
            return None
        host = host.lower().rstrip(".")
        answered = frozenset(d.address for d in entry.dns_log
                             if d.protocol == "dns" and d.address and d.allowed
                             and (d.name or "").lower().rstrip(".") == host)
        return Ruled(host, rules, entry.policy.team, entry.ca, answered)

    def account(self, client: str, sent: int, received: int) -> None:
        entry = self.by_address.get(client)
        if entry is not None:
            entry.relayed_out += sent
            entry.relayed_in += received

    # -- the resolver -------------------------------------------------------------------

    def _note(self, entry: SandboxEgress, name: str, address: str, allowed: bool) -> None:
        entry.dns_log.appendleft(Destination(address=address, port=None, protocol="dns",
                                             allowed=allowed, count=1, name=name,
                                             last_seen=time.time()))

    async def _pin(self, entry: SandboxEgress, name: str, found: list[tuple[str, int]]) -> None:
        ttl = answers.pin_seconds(max(t for _a, t in found))
        # An allowed name answering with an infrastructure address gets nothing pinned.
        addresses = sorted({a for a, _t in found if not self._is_infra(a)})
        if not addresses:
            return
        try:
            await asyncio.to_thread(entry.rules.pin, name, addresses, ttl)
        except PinError:
            _log.debug("pinning %s for %s failed (policy changed)", addresses, name,
                       exc_info=True)

    async def answer(self, client: str, wire: bytes) -> bytes | None:
        entry = self.by_address.get(client)
        if entry is None:
            return None
        question = answers.parse_question(wire)
        if question is None:
            return answers.formerr(wire)
        if entry.policy.name_verdict(question.name) is False:
            self._note(entry, question.name, "", False)
            return answers.blocked(question)
        if question.qtype == "AAAA":
            return answers.no_data(question)
        answer = await self._upstream.query(wire)
        if answer is None:
            return answers.server_failure(question)
        _rcode, found = answers.addresses(answer)
        # The policy may have changed while the upstream answered: decide on the new one.
        verdict = entry.policy.name_verdict(question.name)
        if verdict is False:
            self._note(entry, question.name, "", False)
            return answers.blocked(question)
        if verdict and found:
            await self._pin(entry, question.name, found)
        for address, _ttl in found or [("", 0)]:
            self._note(entry, question.name, address, True)
        return answer
