"""The ports a sandbox listens on, as its usage reports them: asked of the kernel inside
the sandbox's own network namespace, never the host's; loopback listeners and envd's port
left out; nothing for a process that is gone."""

from __future__ import annotations

import os
import socket
import threading

import pytest
from backend_harness import SandboxFactory

from bac_server.backends.namespaces import NamespaceBackend
from bac_server.backends.namespaces.slots._ports import listening_ports

pytestmark = [pytest.mark.root]

LISTEN = """
import socket, time
held = []
for family, host, port in ((socket.AF_INET, "0.0.0.0", 8000), (socket.AF_INET6, "::", 8001),
                           (socket.AF_INET, "127.0.0.1", 8002), (socket.AF_INET6, "::1", 8003),
                           (socket.AF_INET, "0.0.0.0", 8004)):
    s = socket.socket(family)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((host, port))
    if port != 8004:  # bound, never listening
        s.listen()
    held.append(s)
open("/tmp/listening", "w").close()
time.sleep(3600)
"""


@pytest.mark.asyncio(loop_scope="session")
async def test_a_sandboxs_listeners_are_its_own(backend: NamespaceBackend,
                                               make_sandbox: SandboxFactory) -> None:
    host = socket.socket()
    host.bind(("0.0.0.0", 0))
    host.listen()
    try:
        sbx = await make_sandbox()
        assert (await backend.usage(sbx.id)).listening_ports == ()
        await sbx.sdk.files.write("/tmp/listen.py", LISTEN)
        started = await sbx.run("(python3 /tmp/listen.py >/dev/null 2>&1 &); "
                                "while [ ! -e /tmp/listening ]; do sleep 0.02; done")
        assert started.exit_code == 0, started.stderr
        ports = (await backend.usage(sbx.id)).listening_ports
        assert ports == (8000, 8001)
        assert host.getsockname()[1] not in ports
    finally:
        host.close()


def test_no_ports_for_a_process_that_is_gone() -> None:
    # A pid that was never started at this time: a reused pid is not the sandbox's.
    assert listening_ports(os.getpid(), started=1) == ()
    assert listening_ports(2**22 + 12345) == ()


def test_the_server_threads_stay_in_the_host_namespace() -> None:
    """Reading a namespace's listeners moves one dedicated thread only."""
    own = os.readlink("/proc/thread-self/ns/net")
    listening_ports(os.getpid())
    seen: list[str] = []
    probe = threading.Thread(target=lambda: seen.append(os.readlink("/proc/thread-self/ns/net")))
    probe.start()
    probe.join()
    assert os.readlink("/proc/thread-self/ns/net") == own == seen[0]
