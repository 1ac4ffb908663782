"""Each sandbox's egress: its nft policy, its resolver, its counters and destination log.

One ``Egress`` per backend. ``attach`` runs when a slot becomes a sandbox (before envd's
``/init``, so no user code ever runs without its policy), ``update`` on a runtime change,
``detach`` in teardown while the address lease is still held (names derive from it).
The policy is kept in ``network.json`` in the slot directory so a restarted server puts
the same policy back (``restore``). Answers for allowed names are pinned into the
sandbox's sets before the answer is sent, so a connect right after resolving works.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import IPRoute

from bac_server.backends.egress import (
    Destination,
    EgressPolicy,
    NetworkUsage,
    WirePolicy,
    domain_matches,
    parse_policy,
)
from bac_server.host import TABLE_FAMILY, TABLE_NAME, NftError, ensure_firewall, nft

from . import _dns_answers as answers
from ._addresses import AddressPool
from ._dns import DnsListeners, Upstream, host_nameservers
from ._egress_log import read_usage
from ._egress_rules import (
    SandboxNames,
    dns_listener_script,
    install_script,
    pin_script,
    port_specs,
    remove_script,
)

_log = logging.getLogger(__name__)
STATE_FILE = "network.json"
_DNS_LOG = 256
_SWEEP_SPECS = 16  # the most port ranges a policy's domain rules may use


@dataclass
class _Sandbox:
    names: SandboxNames
    state: Path
    policy: EgressPolicy
    dns_log: collections.deque[Destination] = field(
        default_factory=lambda: collections.deque(maxlen=_DNS_LOG))


def _save(path: Path, policy: EgressPolicy) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(policy.to_wire()))
    tmp.replace(path)


def load_policy(path: Path) -> EgressPolicy:
    """The saved policy; a sandbox from before egress existed had none: internet off."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return EgressPolicy(internet=False)
    return parse_policy(WirePolicy(data.get("allowOut"), data.get("denyOut"),
                                   data.get("dnsServers"), data.get("allowInternetAccess")))


def _connected_subnets(veth_prefix: str) -> list[str]:
    """The host's directly attached IPv4 networks (its infrastructure)."""
    subnets = []
    with IPRoute() as ipr:
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        for addr in ipr.get_addr(family=2):
            name = names.get(addr["index"]) or ""
            if name.startswith(veth_prefix) or name == "lo":
                continue
            local = addr.get_attr("IFA_LOCAL") or addr.get_attr("IFA_ADDRESS")
            subnets.append(str(ipaddress.IPv4Network(f"{local}/{addr['prefixlen']}",
                                                     strict=False)))
    return subnets


def _apply(script: str, veth_prefix: str) -> None:
    """Run a sandbox's script; if the table was replaced under us (another version of
    Bac preparing the host), put Bac's table back once and retry."""
    try:
        nft(script)
    except NftError:
        ensure_firewall(veth_prefix)
        nft(script)


class Egress:
    def __init__(self, pool: AddressPool, exempt: tuple[str, ...],
                 upstreams: tuple[str, ...]) -> None:
        self._pool = pool
        self._exempt = [str(ipaddress.IPv4Network(c, strict=False)) for c in exempt]
        self._upstream = Upstream(list(upstreams) or host_nameservers())
        self._listeners = DnsListeners(self._answer)
        self._by_address: dict[str, _Sandbox] = {}
        self._by_veth: dict[str, _Sandbox] = {}

    async def start(self) -> None:
        """Make sure the firewall table is Bac's current one (idempotent, keeps other
        servers' sandboxes), then deny the pool and the host's own networks to every
        sandbox."""
        await asyncio.to_thread(ensure_firewall, self._pool.veth_prefix)
        deny = [str(self._pool.network)]
        deny += await asyncio.to_thread(_connected_subnets, self._pool.veth_prefix)
        # SECURITY: only ever adds to the always-denied set.
        await asyncio.to_thread(
            nft, f"add element {TABLE_FAMILY} {TABLE_NAME} infra_deny {{ {', '.join(deny)} }}")

    # -- per sandbox --------------------------------------------------------------------

    async def attach(self, slot_dir: Path, veth: str, host_address: str,
                     sandbox_address: str, policy: EgressPolicy, old_specs: int = 0) -> None:
        names = SandboxNames(veth, host_address)
        entry = _Sandbox(names, slot_dir / STATE_FILE, policy)
        await self._listeners.listen(host_address)
        script = (install_script(names, policy, self._exempt, old_specs)
                  + dns_listener_script(names, add=True))
        try:
            # SECURITY: installs the sandbox's policy; until this commits its veth has no
            # entry in the egress map and everything it sends is rejected.
            await asyncio.to_thread(self._commit, entry.state, policy, script)
        except BaseException:
            self._listeners.close(host_address)
            raise
        self._by_address[sandbox_address] = entry
        self._by_veth[veth] = entry

    def _commit(self, state: Path, policy: EgressPolicy, script: str) -> None:
        _save(state, policy)
        _apply(script, self._pool.veth_prefix)

    async def update(self, veth: str, policy: EgressPolicy) -> None:
        entry = self._by_veth[veth]
        old = len(port_specs(entry.policy))
        await asyncio.to_thread(self._commit, entry.state, policy,
                                install_script(entry.names, policy, self._exempt, old))
        entry.policy = policy

    async def detach(self, slot_dir: Path, veth: str, host_address: str,
                     sandbox_address: str) -> None:
        entry = self._by_veth.pop(veth, None)
        self._by_address.pop(sandbox_address, None)
        self._listeners.close(host_address)
        specs = _SWEEP_SPECS if entry is None else len(port_specs(entry.policy))
        await asyncio.to_thread(_apply, remove_script(SandboxNames(veth, host_address), specs),
                                self._pool.veth_prefix)
        self.forget(slot_dir)

    def forget(self, slot_dir: Path) -> None:
        """Remove the saved policy (the slot directory is about to go)."""
        (slot_dir / STATE_FILE).unlink(missing_ok=True)
        (slot_dir / STATE_FILE).with_suffix(".tmp").unlink(missing_ok=True)

    async def restore(self, slot_dir: Path, veth: str, host_address: str,
                      sandbox_address: str) -> None:
        """Put a re-attached sandbox's saved policy back (its objects may be gone)."""
        policy = await asyncio.to_thread(load_policy, slot_dir / STATE_FILE)
        await self.attach(slot_dir, veth, host_address, sandbox_address, policy,
                          old_specs=_SWEEP_SPECS)

    def policy(self, veth: str) -> EgressPolicy:
        return self._by_veth[veth].policy

    async def usage(self, veth: str) -> NetworkUsage:
        entry = self._by_veth[veth]
        return await asyncio.to_thread(read_usage, entry.names, list(entry.dns_log))

    async def sweep(self) -> None:
        """Remove nft objects of veths whose address lease is gone (a crashed server)."""
        try:
            out = await asyncio.to_thread(
                nft, f"list map {TABLE_FAMILY} {TABLE_NAME} egress")
        except NftError:
            return
        for token in out.replace(",", " ").split():
            veth = token.strip('"')
            index = self._pool.index_of(veth)
            if index is None or self._pool.owner(index) is not None:
                continue
            lease = self._pool.describe(index)
            _log.info("removing orphaned egress rules of %s", veth)
            await asyncio.to_thread(
                nft, remove_script(SandboxNames(veth, lease.host_address), _SWEEP_SPECS))

    def close(self) -> None:
        self._listeners.close_all()

    # -- the resolver -------------------------------------------------------------------

    def _note(self, entry: _Sandbox, name: str, address: str, allowed: bool) -> None:
        entry.dns_log.appendleft(Destination(address=address, port=None, protocol="dns",
                                             allowed=allowed, count=1, name=name,
                                             last_seen=time.time()))

    async def _pin(self, entry: _Sandbox, name: str, found: list[tuple[str, int]]) -> None:
        ttl = answers.pin_seconds(max(t for _a, t in found))
        addresses = sorted({a for a, _t in found})
        for index, spec in enumerate(port_specs(entry.policy)):
            if any(r.ports == spec and domain_matches(r.value, name)
                   for r in entry.policy.allow_domains()):
                try:
                    await asyncio.to_thread(nft, pin_script(entry.names, index, addresses, ttl))
                except NftError:
                    _log.debug("pinning %s for %s failed (policy changed)", addresses, name)

    async def _answer(self, client: str, wire: bytes) -> bytes | None:
        entry = self._by_address.get(client)
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
