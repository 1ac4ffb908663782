"""Egress from real sandboxes to a fake internet (namespaces on this machine): NAT, the
policy by address and by name, runtime changes, internet off, counters and the log."""

from __future__ import annotations

import os

import pytest
from backend_harness import Sandbox, SandboxFactory, new_id, private_data_dir
from e2b import AsyncSandbox
from fake_internet import METADATA, SITE_A, SITE_B, SITE_C, WEB_UPLINK, FakeInternet
from probes import reach

from bac_server.backends.base import SandboxSpec, TemplateImage
from bac_server.backends.egress import EgressPolicy, WirePolicy, parse_policy
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig
from bac_server.host import remove_tree

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

BLOCKED = "EHOSTUNREACH"


def policy(allow: list[str] | None = None, deny: list[str] | None = None,
           internet: bool | None = None) -> EgressPolicy:
    return parse_policy(WirePolicy(allow, deny, None, internet))


async def test_internet_by_default(make_sandbox: SandboxFactory) -> None:
    """By default a sandbox reaches public addresses through NAT and resolves names."""
    sbx = await make_sandbox()
    found = await reach(sbx, f"{SITE_A}:80", "allowed.test:8080", "other.test:80")
    assert found == {f"{SITE_A}:80": "ok", "allowed.test:8080": "ok", "other.test:80": "ok"}
    echo = await sbx.run(f"curl -s http://{SITE_B}/")
    # The fake site sees the connection arrive at its own address: routed, not proxied.
    assert f'"local": "{SITE_B}"' in echo.stdout


async def test_infrastructure_is_always_denied(make_sandbox: SandboxFactory) -> None:
    """Metadata (169.254.169.254), private uplinks and allowed names answering with a
    private address are refused even with the internet on and the host able to reach them."""
    sbx = await make_sandbox(network=policy(["rebind.test", "metadata.test"], ["0.0.0.0/0"]))
    found = await reach(sbx, f"{METADATA}:80", f"{WEB_UPLINK}:80", "rebind.test:80",
                        "metadata.test:80")
    assert set(found.values()) == {BLOCKED}, found
    open_sbx = await make_sandbox()
    found = await reach(open_sbx, f"{METADATA}:80", f"{WEB_UPLINK}:80")
    assert set(found.values()) == {BLOCKED}, found


async def test_allow_list_by_name_and_address(make_sandbox: SandboxFactory) -> None:
    """In allow-list mode only allowed names resolve, and only their answers and the
    allowed CIDRs are reachable; everything else is refused by address."""
    sbx = await make_sandbox(network=policy(["allowed.test", f"{SITE_C}/32"], ["0.0.0.0/0"]))
    before = await reach(sbx, f"{SITE_A}:80")
    assert before == {f"{SITE_A}:80": BLOCKED}  # not yet resolved through an allowed name
    found = await reach(sbx, "allowed.test:80", "other.test:80", f"{SITE_B}:80",
                        f"{SITE_C}:80", f"{SITE_A}:80")
    assert found == {"allowed.test:80": "ok", "other.test:80": "unresolved",
                     f"{SITE_B}:80": BLOCKED, f"{SITE_C}:80": "ok", f"{SITE_A}:80": "ok"}


async def test_wildcards_and_ports(make_sandbox: SandboxFactory) -> None:
    """``*.wild.test`` allows names below it but not wild.test itself; ``:8080`` limits an
    address rule to that port."""
    sbx = await make_sandbox(network=policy(["*.wild.test", f"{SITE_C}:8080"], ["0.0.0.0/0"]))
    found = await reach(sbx, "a.wild.test:80", "b.wild.test:80", "wild.test:80",
                        f"{SITE_C}:8080", f"{SITE_C}:80")
    assert found == {"a.wild.test:80": "ok", "b.wild.test:80": "ok",
                     "wild.test:80": "unresolved", f"{SITE_C}:8080": "ok",
                     f"{SITE_C}:80": BLOCKED}


async def test_deny_list_in_open_mode(make_sandbox: SandboxFactory) -> None:
    """Denied CIDRs are refused while everything else stays reachable; an allow entry
    inside a denied range wins (E2B's precedence)."""
    sbx = await make_sandbox(network=policy([f"{SITE_C}"], ["198.51.100.0/24"]))
    found = await reach(sbx, f"{SITE_A}:80", f"{SITE_C}:80")
    assert found == {f"{SITE_A}:80": BLOCKED, f"{SITE_C}:80": "ok"}


async def test_runtime_change_takes_effect_on_next_connection(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    """Replacing the policy of a running sandbox changes what its next connection may do,
    both ways, and drops addresses pinned for names no longer allowed."""
    sbx = await make_sandbox()
    assert await reach(sbx, f"{SITE_A}:80") == {f"{SITE_A}:80": "ok"}
    await backend.set_network(sbx.id, policy(["allowed.test"], ["0.0.0.0/0"]))
    found = await reach(sbx, f"{SITE_B}:80", "allowed.test:80")
    assert found == {f"{SITE_B}:80": BLOCKED, "allowed.test:80": "ok"}
    await backend.set_network(sbx.id, policy([f"{SITE_B}"], ["0.0.0.0/0"]))
    found = await reach(sbx, f"{SITE_A}:80", f"{SITE_B}:80", "allowed.test:80")
    assert found == {f"{SITE_A}:80": BLOCKED, f"{SITE_B}:80": "ok",
                     "allowed.test:80": "unresolved"}
    await backend.set_network(sbx.id, EgressPolicy())
    assert await reach(sbx, f"{SITE_A}:80") == {f"{SITE_A}:80": "ok"}


async def test_internet_off_leaves_only_loopback(make_sandbox: SandboxFactory) -> None:
    """With internet access off nothing but the sandbox's loopback works: no address, no
    name, not even DNS to its gateway answers a name."""
    sbx = await make_sandbox(network=policy(internet=False))
    found = await reach(sbx, f"{SITE_A}:80", "allowed.test:80", f"{SITE_B}:9000")
    assert found == {f"{SITE_A}:80": BLOCKED, "allowed.test:80": "unresolved",
                     f"{SITE_B}:9000": BLOCKED}
    await sbx.run("python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 &")
    check = await sbx.run("for i in $(seq 50); do curl -s -o /dev/null -w '%{http_code}' "
                          "http://127.0.0.1:8123/ && break; sleep 0.1; done")
    assert check.stdout.strip().endswith("200")


async def test_counters_and_destination_log(backend: NamespaceBackend,
                                            make_sandbox: SandboxFactory) -> None:
    """Bytes in and out are counted, and the log names allowed and refused destinations
    (with the name they were resolved from)."""
    sbx = await make_sandbox(network=policy(["allowed.test"], ["0.0.0.0/0"]))
    before = await backend.network_usage(sbx.id)
    send = ("import socket\ns = socket.create_connection(('allowed.test', 9000), 5)\n"
            "s.sendall(bytes(200_000))\ns.shutdown(socket.SHUT_WR)\nprint(s.recv(100))\n")
    await sbx.run(f"curl -s -m 3 http://{SITE_B}:8080/")
    sent = await sbx.python(send, user="user")
    assert sent.stdout.strip() == "b'200000'", sent.stderr
    usage = await backend.network_usage(sbx.id)
    assert usage.internet_bytes_out - before.internet_bytes_out > 200_000
    assert usage.internet_bytes_in > before.internet_bytes_in
    assert usage.total_bytes_out >= usage.internet_bytes_out
    seen = {(d.address, d.port, d.allowed, d.name) for d in usage.destinations}
    assert (SITE_A, 9000, True, "allowed.test") in seen
    assert (SITE_B, 8080, False, None) in seen
    assert any(d.protocol == "dns" and d.name == "other.test" and not d.allowed
               for d in usage.destinations) is False  # never asked for
    await sbx.run("getent hosts other.test")
    usage = await backend.network_usage(sbx.id)
    assert any(d.protocol == "dns" and d.name == "other.test" and not d.allowed
               for d in usage.destinations)


async def test_policy_and_resolver_survive_a_server_restart(
        template: TemplateImage, internet: FakeInternet) -> None:
    """A new backend on the same data directory puts each re-attached sandbox's saved
    policy and resolver back: allowed names still resolve, the rest stays refused."""
    data_dir = private_data_dir().with_name(f"restart-{os.getpid()}")
    config = {"data_dir": data_dir, "pool_size": 0, "dns_upstreams": (internet.dns_server,)}
    first = NamespaceBackend(NamespaceConfig(**config))  # type: ignore[arg-type]
    spec = SandboxSpec(sandbox_id=new_id(), template=template,
                       network=policy(["allowed.test"], ["0.0.0.0/0"]))
    endpoint = await first.create(spec)
    await first.close()  # the server goes away; the sandbox keeps running
    second = NamespaceBackend(NamespaceConfig(**config))  # type: ignore[arg-type]
    try:
        assert await second.list() == [spec.sandbox_id]
        sdk = await AsyncSandbox.connect(spec.sandbox_id, debug=True,
                                         sandbox_url=f"http://{endpoint.address}:49983")
        sbx = Sandbox(spec, endpoint, sdk)
        found = await reach(sbx, "allowed.test:80", "other.test:80", f"{SITE_B}:80")
        assert found == {"allowed.test:80": "ok", "other.test:80": "unresolved",
                         f"{SITE_B}:80": BLOCKED}
    finally:
        await second.destroy(spec.sandbox_id)
        await second.close()
        remove_tree(data_dir)


async def test_host_name_is_checked_where_a_domain_rule_applies(
        make_sandbox: SandboxFactory) -> None:
    """An address reachable only through an allowed name serves that name, not others:
    a request naming another host (HTTP Host) is cut, one naming the allowed host or a
    name below an allowed wildcard passes, and a CIDR rule is not subject to the check."""
    sbx = await make_sandbox(network=policy(["allowed.test", "*.wild.test", f"{SITE_C}"],
                                            ["0.0.0.0/0"]))
    script = (
        "import socket, sys\n"
        "def get(address, host):\n"
        "    s = socket.create_connection((address, 80), 5)\n"
        "    s.sendall(f'GET / HTTP/1.1\\r\\nHost: {host}\\r\\nConnection: close\\r\\n\\r\\n'"
        ".encode())\n"
        "    data = b''\n"
        "    while chunk := s.recv(4096):\n"
        "        data += chunk\n"
        "    return 'ok' if data.startswith(b'HTTP/1') else 'cut'\n"
        "a = socket.gethostbyname('allowed.test')\n"
        "socket.gethostbyname('a.wild.test')\n"
        f"print(get(a, 'allowed.test'), get(a, 'evil.test'), get(a, 'a.wild.test'), "
        f"get('{SITE_C}', 'evil.test'))\n")
    result = await sbx.python(script, user="user")
    assert result.stdout.split() == ["ok", "cut", "ok", "ok"], result.stderr


async def test_dns_servers_are_opened_on_port_53_only(make_sandbox: SandboxFactory) -> None:
    """An address given in dnsServers answers on port 53, UDP and TCP, and nothing else
    of it is reachable: not its web server on 80 or 8080."""
    sbx = await make_sandbox(network=parse_policy(WirePolicy(
        ["allowed.test"], ["0.0.0.0/0"], [SITE_C], None)))
    script = (
        "import errno, socket\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "u.settimeout(3)\n"
        f"u.sendto(b'?', ('{SITE_C}', 53))\n"
        "out = [u.recv(100).decode().strip()]\n"
        "for port in (53, 80, 8080):\n"
        "    s = socket.socket()\n"
        "    s.settimeout(3)\n"
        "    try:\n"
        f"        s.connect(('{SITE_C}', port))\n"
        "        out.append(s.recv(100).decode().strip() if port == 53 else 'open')\n"
        "    except OSError as exc:\n"
        "        out.append(errno.errorcode.get(exc.errno or 0, type(exc).__name__))\n"
        "print(out)\n")
    result = await sbx.python(script, user="user")
    assert result.stdout.strip() == str(["udp 53", "tcp 53", BLOCKED, BLOCKED]), result
