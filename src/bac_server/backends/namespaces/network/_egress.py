"""Each sandbox's egress: its nft policy, its resolver, its counters and destination log.

One ``Egress`` per backend. ``attach`` runs when a slot becomes a sandbox (before envd's
``/init``, so no user code ever runs without its policy), ``update`` on a runtime change,
``detach`` in teardown while the address lease is still held (names derive from it).
The policy is kept in ``network.json`` in the slot directory so a restarted server puts
the same policy back (``restore``). Answers for allowed names are pinned into the
sandbox's sets before the answer is sent, so a connect right after resolving works.

Every per-sandbox change of the table is one raw netlink batch (``nft.SandboxRules``), so
none of them grows with the number of sandboxes on the host; libnftables is used only at
start: for the static table (``ensure_firewall``), the always-denied ranges, and a listing
of what the table holds (``nft.read_installed``: sandboxes re-attached or torn down after
a restart, and orphans for ``sweep``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import ipaddress
import json
import logging
from collections.abc import Callable
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from bac_server.backends.egress import (
    EgressPolicy,
    NetworkUsage,
    SecretLookup,
    WirePolicy,
    parse_policy,
)
from bac_server.host import (
    TABLE_FAMILY,
    TABLE_NAME,
    ensure_firewall,
    nft,
    write_private,
)
from bac_server.store.sealing import Sealer, SealError

from ._addresses import AddressPool
from ._dns import DnsListeners, Upstream, host_nameservers
from ._name_checks import NameChecks, SandboxEgress
from ._proxy import EgressProxy, upstream_context
from ._relay_ca import RelayCa
from ._tcp_hold import close_hold_sockets
from ._usage import read_usage
from .nft import Installed, NftSocket, SandboxNames, SandboxRules, read_installed

_log = logging.getLogger(__name__)
STATE_FILE = "network.json"
CA_FILE = "relay-ca.sealed"  # the sandbox's relay CA, key included, sealed


def _save(path: Path, policy: EgressPolicy) -> None:
    # The rules hold placeholders only: no secret's value is ever in this file.
    wire = policy.to_wire()
    write_private(path, json.dumps(wire | {"team": policy.team} if policy.team else wire))


def load_policy(path: Path) -> EgressPolicy:
    """The saved policy; a sandbox from before egress existed had none: internet off."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return EgressPolicy(internet=False)
    return parse_policy(WirePolicy(data.get("allowOut"), data.get("denyOut"),
                                   data.get("dnsServers"), data.get("allowInternetAccess"),
                                   rules=data.get("rules"), team=str(data.get("team") or "")))


def _ca_where(slot_dir: Path) -> str:
    return f"relay-ca:{slot_dir.name}"


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


class Egress:
    def __init__(self, pool: AddressPool, exempt: tuple[str, ...],
                 upstreams: tuple[str, ...], secrets: SecretLookup | None = None,
                 upstream_cas: bytes = b"", sealer: Sealer | None = None) -> None:
        """``secrets``: where the relay reads the values its rules' placeholders name
        (None: requests naming one are refused); ``upstream_cas``: CA certificates (PEM)
        the relay trusts for ruled hosts besides the host's own store; ``sealer``: seals
        each sandbox's relay CA in its slot, for a restarted server (None: kept in memory
        only)."""
        self._sealer = sealer
        self._pool = pool
        self._exempt = [str(ipaddress.IPv4Network(c, strict=False)) for c in exempt]
        self._checks = NameChecks(Upstream(list(upstreams) or host_nameservers()),
                                  [ipaddress.IPv4Network(c) for c in self._exempt])
        self._listeners = DnsListeners(self._checks.answer)
        self._proxy = EgressProxy(self._checks.decide, self._checks.account,
                                  self._checks.ruled, secrets, upstream_context(upstream_cas))
        self._by_veth: dict[str, SandboxEgress] = {}
        self._socket = NftSocket()
        self._installed = Installed()
        # Each veth's rules from the first change on until they are removed (a failed
        # batch changed nothing: what the rules know the veth holds stays true).
        self._rules_of: dict[str, SandboxRules] = {}

    async def start(self) -> None:
        """Make sure the firewall table is Bac's current one (idempotent, keeps other
        servers' sandboxes), deny the pool and the host's own networks to every sandbox,
        and list what the table holds for sandboxes already."""
        await asyncio.to_thread(ensure_firewall, self._pool.veth_prefix)
        deny = [str(self._pool.network)]
        deny += await asyncio.to_thread(_connected_subnets, self._pool.veth_prefix)
        self._checks.deny([ipaddress.IPv4Network(c) for c in deny])
        # SECURITY: only ever adds to the always-denied set.
        await asyncio.to_thread(
            nft, f"add element {TABLE_FAMILY} {TABLE_NAME} infra_deny {{ {', '.join(deny)} }}")
        self._installed = await asyncio.to_thread(read_installed, self._socket, TABLE_NAME,
                                                  self._veth_of)

    def _veth_of(self, sandbox_address: bytes) -> str | None:
        """The veth of a sandbox address of this pool (None for any other address)."""
        offset = int.from_bytes(sandbox_address, "big") - int(self._pool.network.network_address)
        if not 0 <= offset < self._pool.network.num_addresses or offset % 2 != 1:
            return None
        return self._pool.describe(offset // 2).veth

    def _rules(self, veth: str, host_address: str, sandbox_address: str) -> SandboxRules:
        """The veth's rules, made on first use from what the table held at start (the
        veth's contents, taken over once)."""
        rules = self._rules_of.get(veth)
        if rules is None:
            names = SandboxNames(veth, host_address, sandbox_address)
            rules = SandboxRules(self._socket, TABLE_NAME, names, self._exempt,
                                 self._installed.take(veth))
            self._rules_of[veth] = rules
        return rules

    async def _remove(self, rules: SandboxRules) -> None:
        await asyncio.to_thread(self._apply, rules.remove)
        if self._rules_of.get(rules.names.veth) is rules:
            del self._rules_of[rules.names.veth]

    # -- per sandbox --------------------------------------------------------------------

    async def prepare(self, veth: str, host_address: str, sandbox_address: str) -> None:
        """Make ahead what a sandbox on this veth will have whatever its policy (a stocked
        network namespace's: ``NetnsStock``): its own objects (counters, logs, their
        chains) and its resolver and relay listeners. ``attach`` then puts only the
        policy's elements in. The veth stays out of the set ``egress`` until then: it
        reaches nothing. Undone by ``unprepare`` or, once a slot took it, ``detach``."""
        rules = self._rules(veth, host_address, sandbox_address)
        await self._listening(host_address, lambda: self._apply(rules.make_objects))

    async def unprepare(self, veth: str, host_address: str, sandbox_address: str) -> None:
        """Remove what ``prepare`` made (the namespace goes unused)."""
        self._stop_listening(host_address)
        await self._remove(self._rules(veth, host_address, sandbox_address))

    async def _listening(self, host_address: str, change: Callable[[], None]) -> None:
        """Open the resolver's and the relay's listeners on the veth's host address
        (idempotent), then make ``change`` in a worker thread; the listeners close again
        if any of it fails or is cancelled."""
        try:
            await self._listeners.listen(host_address)
            await self._proxy.listen(host_address)
            await asyncio.to_thread(change)
        except BaseException:
            self._stop_listening(host_address)
            raise

    def _stop_listening(self, host_address: str) -> None:
        self._listeners.close(host_address)
        self._proxy.close(host_address)

    async def attach(self, slot_dir: Path, veth: str, host_address: str,
                     sandbox_address: str, policy: EgressPolicy) -> None:
        rules = self._rules(veth, host_address, sandbox_address)
        entry = SandboxEgress(rules, slot_dir / STATE_FILE, policy)
        # SECURITY: installs the sandbox's policy; until this commits its veth is not in
        # the set egress and everything it sends is rejected.
        await self._listening(host_address,
                              lambda: self._commit(entry.state, policy, rules.install))
        self._checks.by_address[sandbox_address] = entry
        self._by_veth[veth] = entry

    def _commit(self, state: Path, policy: EgressPolicy,
                change: Callable[[EgressPolicy], None]) -> None:
        _save(state, policy)
        self._apply(lambda: change(policy))

    def _apply(self, change: Callable[[], None]) -> None:
        """Make a change; if the table (or one of its sets) is gone (another version of
        Bac prepared the host), put Bac's table back once and retry."""
        try:
            change()
        except NetlinkError as exc:
            if exc.code != errno.ENOENT:
                raise
            ensure_firewall(self._pool.veth_prefix)
            change()

    async def update(self, veth: str, policy: EgressPolicy) -> None:
        entry = self._by_veth[veth]
        await asyncio.to_thread(self._commit, entry.state, policy, entry.rules.update)
        entry.policy = policy

    def relay_ca(self, veth: str, label: str) -> str:
        """The PEM certificate of the sandbox's relay CA, made on first use (at hand-out,
        for envd's ``/init`` to add to its trust store); the key stays here, in memory
        and sealed in the slot."""
        entry = self._by_veth[veth]
        if entry.ca is None:
            ca = RelayCa(label)
            if self._sealer is not None:
                write_private(entry.state.with_name(CA_FILE),
                              self._sealer.seal(ca.saved(), _ca_where(entry.state.parent)))
            entry.ca = ca
        return entry.ca.cert_pem

    def made_relay_ca(self, veth: str) -> str | None:
        """The PEM certificate of the sandbox's relay CA if it is made (None: not yet)."""
        entry = self._by_veth.get(veth)
        return None if entry is None or entry.ca is None else entry.ca.cert_pem

    def _load_ca(self, slot_dir: Path) -> RelayCa | None:
        """The relay CA a previous server sealed in the slot (None: none, or it does not
        open: the sandbox's ruled TLS is then closed)."""
        if self._sealer is None:
            return None
        try:
            sealed = (slot_dir / CA_FILE).read_text()
            return RelayCa("", saved=self._sealer.open(sealed, _ca_where(slot_dir)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, SealError):
            _log.warning("the relay CA of %s does not open; its ruled TLS stays closed",
                         slot_dir.name)
            return None

    async def detach(self, slot_dir: Path, veth: str, host_address: str,
                     sandbox_address: str) -> None:
        rules = self._rules(veth, host_address, sandbox_address)
        self._by_veth.pop(veth, None)
        self._checks.by_address.pop(sandbox_address, None)
        self._stop_listening(host_address)
        await self._remove(rules)
        self.forget(slot_dir)

    def forget(self, slot_dir: Path) -> None:
        """Remove the saved policy (the slot directory is about to go)."""
        (slot_dir / STATE_FILE).unlink(missing_ok=True)
        (slot_dir / STATE_FILE).with_suffix(".tmp").unlink(missing_ok=True)
        (slot_dir / CA_FILE).unlink(missing_ok=True)

    async def restore(self, slot_dir: Path, veth: str, host_address: str,
                      sandbox_address: str) -> None:
        """Put a re-attached sandbox's saved policy back (its objects may be gone)."""
        policy = await asyncio.to_thread(load_policy, slot_dir / STATE_FILE)
        await self.attach(slot_dir, veth, host_address, sandbox_address, policy)
        self._by_veth[veth].ca = await asyncio.to_thread(self._load_ca, slot_dir)

    async def usage(self, veth: str) -> NetworkUsage:
        entry = self._by_veth[veth]
        usage = await asyncio.to_thread(read_usage, self._socket, TABLE_NAME,
                                        entry.rules.names, list(entry.dns_log))
        return dataclasses.replace(
            usage, internet_bytes_out=usage.internet_bytes_out + entry.relayed_out,
            internet_bytes_in=usage.internet_bytes_in + entry.relayed_in)

    def recent(self, veth: str, limit: int) -> tuple[tuple[str, bool], ...]:
        """The sandbox's last distinct destinations, newest first, from the logs kept in
        memory (names resolved, connections checked): no system call, for every sample."""
        entry = self._by_veth.get(veth)
        if entry is None:
            return ()
        found: dict[str, bool] = {}
        for seen in entry.dns_log:
            label = seen.name or (seen.address if seen.port is None
                                  else f"{seen.address}:{seen.port}")
            if label and label not in found:
                found[label] = seen.allowed
                if len(found) == limit:
                    break
        return tuple(found.items())

    async def sweep(self) -> None:
        """Remove the elements and objects of veths whose address lease is gone (a
        crashed server), as listed at start."""
        for veth in sorted(self._installed.veths()):
            index = self._pool.index_of(veth)
            if index is None or self._pool.owner(index) is not None:
                continue
            lease = self._pool.describe(index)
            _log.info("removing orphaned egress rules of %s", veth)
            try:
                await self._remove(self._rules(veth, lease.host_address,
                                               lease.sandbox_address))
            except (NetlinkError, OSError):
                _log.exception("could not remove the egress rules of %s", veth)

    async def close(self) -> None:
        """Close the DNS and proxy listeners of every sandbox (their rules stay: the
        sandboxes keep running and a next server attaches them again), the table's
        socket and the holds', and wait until every socket is closed."""
        await self._listeners.close_all()
        self._proxy.close_all()
        await asyncio.to_thread(self._socket.close)
        await close_hold_sockets()
