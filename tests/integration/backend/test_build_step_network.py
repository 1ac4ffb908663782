"""A build step's network: the internet by default, its policy applied, the host never."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from test_build_step_support import fake_target, probe

from bac_server.backends.base import TemplateImage
from bac_server.backends.egress import EgressPolicy
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]
HOST_ADDRESS = "192.0.2.2"  # this machine's eth0 (isolation-facts: the test host)


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    with fake_target() as address:
        yield address


@pytest_asyncio.fixture(loop_scope="session")
async def host_port() -> AsyncIterator[int]:
    """A TCP listener of the host on every address."""
    server = await asyncio.start_server(lambda _r, w: w.close(), "0.0.0.0", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


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


async def test_step_cannot_reach_the_host(backend: NamespaceBackend, template: TemplateImage,
                                          target: str, host_port: int) -> None:
    """The host's listener is unreachable at its own address, at the step's gateway and
    at the host's end of another network, while the internet stays reachable."""
    _, writer = await asyncio.open_connection(HOST_ADDRESS, host_port)
    writer.close()  # the listener does answer on the host
    uplink = target.replace("203.0.113.", "10.204.") + ".1"
    targets = [f"{HOST_ADDRESS}:{host_port}", f"gateway:{host_port}", f"{uplink}:{host_port}"]
    found = await probe(backend, (template.rootfs,), f"{target}:80", *targets)
    assert found.pop(f"{target}:80") == "ok"
    assert all(result != "ok" for result in found.values()), found
