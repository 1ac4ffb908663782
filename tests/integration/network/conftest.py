"""Fixtures for the networking tests: a fake internet made of network namespaces on this
machine, and a real backend whose sandboxes resolve names through it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))
sys.path.insert(0, str(Path(__file__).parent))

from backend_harness import SandboxFactory, backend_and_factory, base_template, private_data_dir
from fake_internet import FakeInternet, fake_internet

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import remove_tree


@pytest.fixture(scope="session")
def template() -> TemplateImage:
    return base_template()


@pytest.fixture(scope="session")
def internet(template: TemplateImage) -> Iterator[FakeInternet]:
    with fake_internet() as net:
        yield net


@pytest.fixture(scope="session")
def data_dir() -> Iterator[Path]:
    path = private_data_dir()
    yield path
    remove_tree(path)


@pytest_asyncio.fixture(loop_scope="session")
async def backend_factory(template: TemplateImage, data_dir: Path, internet: FakeInternet
                          ) -> AsyncIterator[tuple[NamespaceBackend, SandboxFactory]]:
    async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                   dns_upstreams=(internet.dns_server,)) as pair:
        yield pair


@pytest_asyncio.fixture(loop_scope="session")
async def backend(backend_factory: tuple[NamespaceBackend, SandboxFactory]) -> NamespaceBackend:
    return backend_factory[0]


@pytest_asyncio.fixture(loop_scope="session")
async def make_sandbox(backend_factory: tuple[NamespaceBackend, SandboxFactory]
                       ) -> SandboxFactory:
    return backend_factory[1]
