"""A runc backend with CRIU for one test module, in a data dir of its own.

A module takes the three fixtures with
``runc_pair, runc, make = runc_fixtures("name")``: the backend and its sandbox factory
(module-scoped, skipped without CRIU >= 4.2, or without Bac's CRIU when the module
needs established connections kept), and each of them alone. ``ECHO_SERVER`` is a
script whose connections those modules keep across pauses; ``second_backend`` starts a
backend like ``runc`` on a data dir of its own (a server to stop and start again) with
one sandbox in it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from backend_harness import Sandbox, SandboxFactory, backend_and_factory, new_id

from bac_server.backends.base import SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend, testing
from bac_server.backends.namespaces.checkpoint import Criu
from bac_server.host import remove_tree

Pair = tuple[NamespaceBackend, SandboxFactory]
# A server for connections kept across a pause: upper-cases what it receives on port 7000,
# one thread per connection; touches /tmp/echo-ready once listening.
ECHO_SERVER = ("import socketserver\n"
               "class Echo(socketserver.BaseRequestHandler):\n"
               "    def handle(self):\n"
               "        while data := self.request.recv(4096):\n"
               "            self.request.sendall(data.upper())\n"
               "server = socketserver.ThreadingTCPServer(('0.0.0.0', 7000), Echo)\n"
               "open('/tmp/echo-ready', 'w').close()\n"
               "server.serve_forever()\n")


def criu_of(backend: NamespaceBackend) -> Criu | None:
    """The CRIU the started backend found (None: memory cannot be saved here)."""
    return testing.criu(backend)


def runc_fixtures(suffix: str, *, tcp_repair: bool = False, **config: object
                  ) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """``config``: more ``NamespaceConfig`` fields of the module's backend."""

    @pytest_asyncio.fixture(loop_scope="session", scope="module")
    async def runc_pair(template: TemplateImage, data_dir: Path) -> AsyncIterator[Pair]:
        path = data_dir.with_name(f"{data_dir.name}-{suffix}")
        async with backend_and_factory(template, data_dir=path, pool_size=0,
                                       runtime="runc", **config) as pair:
            await pair[0].list()  # starts the backend, which looks for CRIU
            criu = criu_of(pair[0])
            if criu is None:
                pytest.skip("no CRIU >= 4.2 on this host (scripts/build-criu.sh)")
            if tcp_repair and not criu.tcp_repair:
                pytest.skip("needs Bac's CRIU (scripts/build-criu.sh): connections are "
                            "closed")
            yield pair
        remove_tree(path)

    @pytest.fixture
    def runc(runc_pair: Pair) -> NamespaceBackend:
        return runc_pair[0]

    @pytest.fixture
    def make(runc_pair: Pair) -> SandboxFactory:
        return runc_pair[1]

    return runc_pair, runc, make


async def second_backend(runc: NamespaceBackend, template: TemplateImage, label: str
                         ) -> tuple[NamespaceBackend, SandboxSpec, Sandbox]:
    """A backend configured as ``runc`` on a data dir of its own (named after ``label``)
    and a sandbox made in it; the caller closes the backend and removes its data dir."""
    config = dataclasses.replace(runc.config,
                                 data_dir=runc.config.data_dir.with_name(new_id(label)))
    backend = NamespaceBackend(config)
    spec = SandboxSpec(sandbox_id=new_id(), template=template)
    sandbox = await SandboxFactory(backend, template).attach(spec, await backend.create(spec))
    return backend, spec, sandbox
