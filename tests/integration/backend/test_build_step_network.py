"""A build step's network: the internet by default, its policy applied (the host being
unreachable is proved in tests/security/test_build_step_escape.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_build_step_support import Output, fake_target, layers_dir, probe

from bac_server.backends.base import BuildStep, TemplateImage
from bac_server.backends.egress import EgressPolicy
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    with fake_target() as address:
        yield address


async def test_step_reaches_the_internet_by_default(backend: NamespaceBackend,
                                                    template: TemplateImage,
                                                    target: str) -> None:
    """With the default policy a step connects to a public address."""
    found = await probe(backend, (template.rootfs,), f"{target}:80", f"{target}:8080")
    assert found == {f"{target}:80": "ok", f"{target}:8080": "ok"}


async def test_step_policy_is_enforced(backend: NamespaceBackend, template: TemplateImage,
                                       target: str) -> None:
    """``step.network`` applies: internet off reaches nothing."""
    found = await probe(backend, (template.rootfs,), f"{target}:80",
                        network=EgressPolicy(internet=False))
    assert found[f"{target}:80"] != "ok"


_DNS_PROBE = """
import socket, struct
server = next(line.split()[1] for line in open("/etc/resolv.conf")
              if line.startswith("nameserver"))
name = b"".join(bytes([len(p)]) + p for p in b"example.com".split(b".")) + b"\\0"
query = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(query, (server, 53))
reply = s.recv(4096)
print(server, struct.unpack(">H", reply[:2])[0] == 0x1234, reply[3] & 0x0F)
"""


async def test_step_has_its_own_resolver_with_its_policy(backend: NamespaceBackend,
                                                         template: TemplateImage) -> None:
    """The step's /etc/resolv.conf names its gateway, where the sandbox resolver answers
    by the step's policy (a name it denies: NXDOMAIN at once)."""
    output = Output()
    step = BuildStep(lowers=(template.rootfs,), upper=layers_dir(backend) / "layer",
                     argv=("python3", "-c", _DNS_PROBE), network=EgressPolicy(internet=False))
    assert await backend.run_build_step(step, output) == 0, output.lines
    server, matched, rcode = output.stdout[-1].split()
    assert server.startswith("10.202.") and matched == "True" and rcode == "3"
