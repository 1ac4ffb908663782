"""Fixtures for envd's integration tests: a real envd subprocess on loopback, driven by
the official e2b SDK (2.63.0) in debug mode pointed at it, plus raw clients where the SDK
hides wire details (chunk sizes, error codes it swallows)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from e2b import AsyncSandbox, Sandbox
from envd_harness import Envd, running_envd

from bac_protocol.envd.filesystem_connect import FilesystemClientSync
from bac_protocol.envd.process_connect import ProcessClientSync


@pytest.fixture(scope="module")
def envd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envd]:
    """One envd per test module, no access token (the SDK's debug mode sends none)."""
    workdir = tmp_path_factory.mktemp("envd-workdir")
    with running_envd(workdir, env_vars={"BAC_SANDBOX_VAR": "from-init"}) as instance:
        yield instance


@pytest.fixture(scope="module")
def secured_envd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envd]:
    """An envd initialised with an access token."""
    workdir = tmp_path_factory.mktemp("envd-secured")
    with running_envd(workdir, token=secrets.token_hex(16)) as instance:
        yield instance


@pytest.fixture
def sandbox(envd: Envd) -> Sandbox:
    return Sandbox.create(debug=True, sandbox_url=envd.url)


@pytest.fixture
async def async_sandbox(envd: Envd) -> AsyncIterator[AsyncSandbox]:
    yield await AsyncSandbox.create(debug=True, sandbox_url=envd.url)


@pytest.fixture
def workdir(envd: Envd, request: pytest.FixtureRequest) -> Path:
    """A fresh directory per test inside the envd's default workdir."""
    path = envd.workdir / request.node.name.replace("[", "_").replace("]", "")
    path.mkdir()
    return path


@pytest.fixture
def process_rpc(envd: Envd) -> Iterator[ProcessClientSync]:
    from connectrpc.codec import proto_json_codec

    client = ProcessClientSync(envd.url, codec=proto_json_codec(), send_compression=None)
    yield client
    client.close()


@pytest.fixture
def filesystem_rpc(envd: Envd) -> Iterator[FilesystemClientSync]:
    from connectrpc.codec import proto_json_codec

    client = FilesystemClientSync(envd.url, codec=proto_json_codec(), send_compression=None)
    yield client
    client.close()
