"""nft scripts for one sandbox's egress: its policy chain, sets, counters and logs.

Everything lives in table ``inet bac`` (see ``bac_server.host._nftables``) under names
derived from the sandbox's veth (``bacs17``), which is unique host-wide because it comes
from the address lease. A sandbox's objects are of two kinds:

* kept for its whole life: byte counters ``tx_/rx_<veth>``, the logs of destinations it
  reached or was refused (``seen_/blk_<veth>``: bounded sets with counters and expiry,
  filled by the kernel) and the map entries pointing at them;
* replaced on every policy change: the policy chain ``p_<veth>`` with its verdict chains,
  the allow/deny CIDR sets, and one set per port range of its domain rules, which the
  resolver fills with the addresses it answered for allowed names (with their TTL).

Every script is one transaction. Removal first *adds* each object (a no-op when it
exists) and then deletes it, so it succeeds whatever a crash left half made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bac_server.backends.egress import ALL_TRAFFIC, EgressPolicy, EgressRule, RuleKind
from bac_server.host import EGRESS_PROXY_PORT, TABLE_FAMILY, TABLE_NAME

T = f"{TABLE_FAMILY} {TABLE_NAME}"
LOG_SIZE = 256  # destinations remembered per sandbox and verdict
LOG_TIMEOUT = "1h"
_L4 = "meta l4proto { tcp, udp }"


@dataclass(frozen=True)
class SandboxNames:
    veth: str
    host_address: str

    @property
    def chain(self) -> str:
        return f"p_{self.veth}"

    @property
    def proxy_chain(self) -> str:
        return f"x_{self.veth}"

    def set(self, kind: str) -> str:
        return f"{kind}_{self.veth}"

    def dyn(self, index: int) -> str:
        return f"n{index}_{self.veth}"


def port_specs(policy: EgressPolicy) -> list[tuple[int, int] | None]:
    """The distinct port ranges of the domain allow rules, in a stable order."""
    return list(dict.fromkeys(r.ports for r in policy.allow_domains()))


def _ports(rule: EgressRule) -> str:
    assert rule.ports is not None
    low, high = rule.ports
    return f"{_L4} th dport {low}" if low == high else f"{_L4} th dport {low}-{high}"


def _elements(values: Sequence[str]) -> str:
    return ", ".join(values)


def _kept_objects(n: SandboxNames) -> list[str]:
    log = (f"type ipv4_addr . inet_proto . inet_service; flags dynamic,timeout; "
           f"timeout {LOG_TIMEOUT}; size {LOG_SIZE}; counter;")
    return [f"counter {T} {n.set('tx')}", f"counter {T} {n.set('rx')}",
            f"set {T} {n.set('seen')} {{ {log} }}", f"set {T} {n.set('blk')} {{ {log} }}"]


def _policy_objects(n: SandboxNames, specs: int) -> list[str]:
    cidr = "type ipv4_addr; flags interval; auto-merge;"
    objects = [f"chain {T} {n.chain}", f"chain {T} ok_{n.veth}", f"chain {T} no_{n.veth}",
               f"chain {T} {n.proxy_chain}",
               f"set {T} {n.set('a')} {{ {cidr} }}", f"set {T} {n.set('d')} {{ {cidr} }}"]
    objects += [f"set {T} {n.dyn(i)} {{ type ipv4_addr; flags timeout; }}" for i in range(specs)]
    return objects


def _map_entries(n: SandboxNames) -> list[tuple[str, str, str]]:
    return [("egress", f'"{n.veth}"', f"jump {n.chain}"),
            ("proxied", f'"{n.veth}"', f"jump {n.proxy_chain}"),
            ("tx_bytes", f'"{n.veth}"', f'"{n.set("tx")}"'),
            ("rx_bytes", f'"{n.veth}"', f'"{n.set("rx")}"')]


def _policy_rules(n: SandboxNames, policy: EgressPolicy, exempt: Sequence[str]) -> list[str]:
    ok, no = f"goto ok_{n.veth}", f"goto no_{n.veth}"
    rules = []
    infra = "ip daddr @infra_deny"
    if exempt:
        infra += f" ip daddr != {{ {_elements(exempt)} }}"
    rules.append(f"{infra} {no}")
    for index, spec in enumerate(port_specs(policy)):
        ports = "" if spec is None else _ports(EgressRule(RuleKind.DOMAIN, "", spec)) + " "
        rules.append(f"{ports}ip daddr @{n.dyn(index)} {ok}")
    rules.append(f"ip daddr @{n.set('a')} {ok}")
    if policy.dns_servers and policy.allow_domains():
        # E2B opens them only with domain rules; a resolver is DNS, nothing else of it.
        rules.append(f"{_L4} th dport 53 ip daddr {{ {_elements(policy.dns_servers)} }} {ok}")
    for rule in policy.allow:
        if rule.kind is RuleKind.CIDR and rule.ports is not None:
            rules.append(f"{_ports(rule)} ip daddr {rule.value} {ok}")
    rules.append(f"ip daddr @{n.set('d')} {no}")
    for rule in policy.deny:
        if rule.kind is RuleKind.CIDR and rule.ports is not None:
            rules.append(f"{_ports(rule)} ip daddr {rule.value} {no}")
    rules.append(no if policy.denies_all else ok)
    rules = [f"add rule {T} {n.chain} {r}" for r in rules]
    for index, spec in enumerate(port_specs(policy)):
        # Connections allowed only through a domain rule go to the relay that checks
        # the host name they open with (TLS SNI / HTTP Host).
        ports = "" if spec is None else (
            f" tcp dport {spec[0]}" if spec[0] == spec[1] else f" tcp dport {spec[0]}-{spec[1]}")
        rules.append(f"add rule {T} {n.proxy_chain} meta l4proto tcp{ports} "
                     f"ip daddr @{n.dyn(index)} ip daddr != @{n.set('a')} "
                     f"redirect to :{EGRESS_PROXY_PORT}")
    key = "{ ip daddr . meta l4proto . th dport }"
    rules += [f"add rule {T} ok_{n.veth} {_L4} update @{n.set('seen')} {key}",
              f"add rule {T} ok_{n.veth} accept",
              f"add rule {T} no_{n.veth} {_L4} update @{n.set('blk')} {key}",
              f"add rule {T} no_{n.veth} reject with icmpx type admin-prohibited"]
    return rules


def _cidr_sets(n: SandboxNames, policy: EgressPolicy) -> list[str]:
    allow = [r.value for r in policy.allow if r.kind is RuleKind.CIDR and r.ports is None]
    deny = [r.value for r in policy.deny if r.kind is RuleKind.CIDR and r.ports is None
            and r.value != ALL_TRAFFIC]  # deny-all is the chain's default instead
    lines = []
    if allow:
        lines.append(f"add element {T} {n.set('a')} {{ {_elements(allow)} }}")
    if deny:
        lines.append(f"add element {T} {n.set('d')} {{ {_elements(deny)} }}")
    return lines


def _remove_policy(n: SandboxNames, old_specs: int) -> list[str]:
    lines = []
    for obj in _policy_objects(n, old_specs):
        lines.append(f"add {obj}")
    for obj in _policy_objects(n, old_specs):
        if obj.startswith("chain"):
            lines.append(f"flush {obj}")
    for obj in _policy_objects(n, old_specs):
        lines.append(f"delete {obj.split(' {')[0]}")
    return lines


def install_script(n: SandboxNames, policy: EgressPolicy, exempt: Sequence[str],
                   old_specs: int) -> str:
    """Create or replace the sandbox's policy in one transaction, whatever exists."""
    lines = [f"add {obj}" for obj in _kept_objects(n)]
    # Unhook the old chains (the entries are re-added below, in the same transaction).
    lines += [f"add chain {T} {c}" for c in (n.chain, n.proxy_chain)]
    for name, key, value in _map_entries(n)[:2]:
        lines.append(f"add element {T} {name} {{ {key} : {value} }}")
        lines.append(f"delete element {T} {name} {{ {key} }}")
    lines += _remove_policy(n, old_specs)
    lines += [f"add {obj}" for obj in _policy_objects(n, len(port_specs(policy)))]
    lines += _cidr_sets(n, policy)
    lines += _policy_rules(n, policy, exempt)
    lines += [f"add element {T} {m} {{ {k} : {v} }}" for m, k, v in _map_entries(n)]
    return "\n".join(lines) + "\n"


def dns_listener_script(n: SandboxNames, add: bool) -> str:
    element = f"{{ {n.host_address} . \"{n.veth}\" }}"
    head = f"add element {T} dns_listeners {element}\n"
    return head if add else head + f"delete element {T} dns_listeners {element}\n"


def remove_script(n: SandboxNames, specs: int) -> str:
    """Delete every object of the sandbox; succeeds whatever exists."""
    lines = [f"add {obj}" for obj in _kept_objects(n)]
    lines += [f"add chain {T} {c}" for c in (n.chain, n.proxy_chain)]
    for name, key, value in _map_entries(n):
        lines.append(f"add element {T} {name} {{ {key} : {value} }}")
        lines.append(f"delete element {T} {name} {{ {key} }}")
    lines += _remove_policy(n, specs)
    lines += [f"delete {obj.split(' {')[0]}" for obj in _kept_objects(n)]
    lines.append(dns_listener_script(n, add=False).strip())
    return "\n".join(lines) + "\n"
