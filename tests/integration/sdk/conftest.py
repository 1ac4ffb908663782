"""Fixtures for the SDK's integration tests: a real envd on the host, and a real Bac server.

``host_envd`` runs ``python -m bac_envd`` as a host process (no sandbox, no root needed)
and initialises it the way the server does, so the envd-facing half of the SDK is tested
against the real daemon over real HTTP. ``bac_server`` (see ``sdk_server.py``) starts the
whole server for the end-to-end tests.
"""

from __future__ import annotations

import getpass
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio
from sdk_envd_host import HostEnvd, envd_sandbox
from sdk_server import BacServer, running_server

from bac import AsyncSandbox, Sandbox
from bac._portal import PORTAL

READY_TIMEOUT = 20.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def host_envd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostEnvd]:
    """A real envd listening on loopback, initialised with a token, env vars and workdir."""
    workdir = tmp_path_factory.mktemp("envd-home")
    log = workdir.parent / f"{workdir.name}.log"
    port = _free_port()
    read_fd, write_fd = os.pipe()
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bac_envd", "--host", "127.0.0.1", "--port", str(port),
             "--ready-fd", str(write_fd), "--preload"],
            pass_fds=(write_fd,),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd, "rb") as ready:
            # envd writes one line once it listens; EOF means it died first.
            line = ready.readline()
        if line != b"ready\n":
            proc.kill()
            proc.wait(timeout=READY_TIMEOUT)
            pytest.fail(f"envd did not start: {log.read_text(errors='replace')}")
        url = f"http://127.0.0.1:{port}"
        token = secrets.token_hex(16)
        env_vars = {"BAC_TEST_GLOBAL": "from-init"}
        response = httpx.post(
            f"{url}/init",
            json={
                "accessToken": token,
                # The commands are login shells on the test machine: HOME is their own,
                # not the operator's (whose profile may take locks a killed command
                # leaves behind, such as `pyenv rehash`'s).
                "envVars": env_vars | {"HOME": str(workdir)},
                "defaultUser": getpass.getuser(),
                "defaultWorkdir": str(workdir),
            },
            timeout=READY_TIMEOUT,
        )
        assert response.status_code == 204, response.text
        yield HostEnvd(url, token, workdir, env_vars)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest_asyncio.fixture  # on the session loop, like the tests
async def sbx(host_envd: HostEnvd) -> AsyncIterator[AsyncSandbox]:
    """The async SDK pointed at the host envd."""
    box = envd_sandbox(host_envd)
    yield box
    await box.aclose()


@pytest.fixture
def sync_sbx(host_envd: HostEnvd) -> Iterator[Sandbox]:
    """The sync SDK pointed at the host envd (its async core lives on the portal loop)."""

    async def make() -> AsyncSandbox:
        return envd_sandbox(host_envd)

    box = Sandbox(PORTAL.run(make()))
    yield box
    box.close()


@pytest.fixture(scope="session")
def bac_server() -> Iterator[BacServer]:
    """A real Bac server with real sandboxes (needs root and a prepared machine)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: sandboxes need namespaces, cgroups and mounts")
    with running_server() as server:
        yield server
