"""From inside a sandbox, neither the host's own addresses nor other sandboxes are
reachable; only the host can open connections, and only their answers come back."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from backend_harness import Sandbox, SandboxFactory

from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

CONNECT = """
import socket, sys
results = []
for host, port in {targets!r}:
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        results.append(f"{{host}}:{{port}} CONNECTED")
    except OSError as exc:
        results.append(f"{{host}}:{{port}} refused {{type(exc).__name__}}")
    finally:
        s.close()
print("\\n".join(results))
"""


class Listener:
    """A TCP server on the host that counts the connections it accepted."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0
        self.event = asyncio.Event()

    async def _handle(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.event.set()
        writer.close()


@pytest_asyncio.fixture(loop_scope="session")
async def host_listener() -> AsyncIterator[tuple[Listener, Listener]]:
    """One listener on every host address (0.0.0.0) and one on 127.0.0.1 only."""
    wildcard, loopback = Listener(), Listener()
    servers = []
    for listener, host in ((wildcard, "0.0.0.0"), (loopback, "127.0.0.1")):
        server = await asyncio.start_server(listener._handle, host, 0)
        listener.port = server.sockets[0].getsockname()[1]
        servers.append(server)
    yield wildcard, loopback
    for server in servers:
        server.close()
        await server.wait_closed()


def _host_addresses() -> list[str]:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True)
    return [line.split()[3].split("/")[0] for line in out.stdout.splitlines()
            if not line.split()[1].startswith("bacs")]


async def _connect_from(sbx: Sandbox, targets: list[tuple[str, int]]) -> list[str]:
    result = await sbx.python(CONNECT.format(targets=targets), user="user")
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip().splitlines()


async def test_host_addresses_are_unreachable(backend: NamespaceBackend,
                                              make_sandbox: SandboxFactory,
                                              host_listener: tuple[Listener, Listener]) -> None:
    """A listener on all host addresses is reachable from the host but not from a sandbox,
    neither at the veth's host side nor at any other host address."""
    wildcard, _loopback = host_listener
    sbx = await make_sandbox()
    record_host_side = sbx.address.rsplit(".", 1)
    veth_host = f"{record_host_side[0]}.{int(record_host_side[1]) - 1}"
    # positive control: the host itself reaches the listener on the veth address
    _reader, writer = await asyncio.open_connection(veth_host, wildcard.port)
    await asyncio.wait_for(wildcard.event.wait(), 5)
    writer.close()
    seen_before = wildcard.accepted
    assert seen_before >= 1
    targets = [(veth_host, wildcard.port)] + [(a, wildcard.port) for a in _host_addresses()]
    lines = await _connect_from(sbx, targets)
    assert not [line for line in lines if "CONNECTED" in line], lines
    assert wildcard.accepted == seen_before


async def test_host_loopback_is_not_the_sandbox_loopback(
        make_sandbox: SandboxFactory, host_listener: tuple[Listener, Listener]) -> None:
    """127.0.0.1 inside is the sandbox's own loopback: the host's 127.0.0.1 listener is
    never reached, while a listener inside the sandbox is."""
    _wildcard, loopback = host_listener
    sbx = await make_sandbox()
    lines = await _connect_from(sbx, [("127.0.0.1", loopback.port)])
    assert "CONNECTED" not in lines[0]
    assert loopback.accepted == 0
    await sbx.run("python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 &")
    check = await sbx.run("for i in $(seq 50); do curl -s -o /dev/null -w '%{http_code}' "
                          "http://127.0.0.1:8123/ && break; sleep 0.1; done")
    assert check.stdout.strip().endswith("200")


async def test_other_sandboxes_are_unreachable(make_sandbox: SandboxFactory) -> None:
    """A server in sandbox B answers the host but not sandbox A."""
    a = await make_sandbox()
    b = await make_sandbox()
    await b.run("python3 -m http.server 8000 >/dev/null 2>&1 &")
    async with httpx.AsyncClient(trust_env=False) as client:
        for _attempt in range(100):  # the server needs a moment to bind; poll with a bound
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"http://{b.address}:8000/", timeout=1)).status_code \
                        == 200:
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("positive control failed: the host cannot reach sandbox B")
    lines = await _connect_from(a, [(b.address, 8000), (b.address, 49983)])
    assert not [line for line in lines if "CONNECTED" in line], lines


async def test_spoofed_source_addresses_are_dropped(make_sandbox: SandboxFactory) -> None:
    """Even with a forged source address (if it could send one) nothing leaves: the
    sandbox cannot bind another sandbox's address at all."""
    a = await make_sandbox()
    b = await make_sandbox()
    result = await a.python(
        "import socket\ns = socket.socket()\n"
        f"try:\n    s.bind(('{b.address}', 0))\n    print('bound')\n"
        "except OSError as exc:\n    print('refused', exc.errno)\n", user="root")
    assert result.stdout.startswith("refused"), result.stdout
