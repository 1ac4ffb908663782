"""Fixtures for tests that make real sandboxes with a session-wide NamespaceBackend.

Imported by the conftest.py of each directory that needs them (backend, security,
network); a directory that needs a differently configured backend redefines
``backend_factory`` after the import.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from backend_harness import SandboxFactory, backend_and_factory, base_template, private_data_dir

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import remove_tree


@pytest.fixture(scope="session")
def template() -> TemplateImage:
    return base_template()


@pytest.fixture(scope="session")
def data_dir() -> Iterator[Path]:
    path = private_data_dir()
    yield path
    remove_tree(path)


@pytest_asyncio.fixture(loop_scope="session")
async def backend_factory(template: TemplateImage, data_dir: Path
                          ) -> AsyncIterator[tuple[NamespaceBackend, SandboxFactory]]:
    async with backend_and_factory(template, data_dir=data_dir, pool_size=0) as pair:
        yield pair


@pytest_asyncio.fixture(loop_scope="session")
async def backend(backend_factory: tuple[NamespaceBackend, SandboxFactory]) -> NamespaceBackend:
    return backend_factory[0]


@pytest_asyncio.fixture(loop_scope="session")
async def make_sandbox(backend_factory: tuple[NamespaceBackend, SandboxFactory]
                       ) -> SandboxFactory:
    return backend_factory[1]
