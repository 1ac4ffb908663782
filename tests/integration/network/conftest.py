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

from backend_fixtures import backend, data_dir, make_sandbox, template
from backend_harness import SandboxFactory, backend_and_factory
from fake_internet import FakeInternet, fake_internet

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend

# Shared fixtures; backend_factory is redefined below to resolve through the fake internet.
__all__ = ["backend", "data_dir", "make_sandbox", "template"]


@pytest.fixture(scope="session")
def internet(template: TemplateImage) -> Iterator[FakeInternet]:
    with fake_internet() as net:
        yield net


@pytest_asyncio.fixture(loop_scope="session")
async def backend_factory(template: TemplateImage, data_dir: Path, internet: FakeInternet
                          ) -> AsyncIterator[tuple[NamespaceBackend, SandboxFactory]]:
    async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                   dns_upstreams=(internet.dns_server,)) as pair:
        yield pair

