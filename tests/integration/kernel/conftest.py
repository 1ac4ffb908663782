"""Fixtures for the kernel server's tests: the real server as a subprocess on loopback,
driven by the official e2b-code-interpreter SDK (2.11.5) in debug mode pointed at it.

One server per test module (kernel start-up is the slow part); tests that need a fresh
kernel create their own context.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2b_code_interpreter import Sandbox
from kernel_harness import Daemon, running_kernel_server


@pytest.fixture(scope="package", autouse=True)
def own_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Kernels here run on the test machine, and the bash kernel's shell reads the
    operator's ``~/.bashrc``: one that runs ``pyenv rehash`` takes a lock file, and a
    kernel killed by a test at that instant leaves it behind, so every later login shell
    of the machine waits a minute for it. The kernels get a HOME of their own."""
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(tmp_path_factory.mktemp("kernels-home"))
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved


@pytest.fixture(scope="module")
def kernel_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    home = tmp_path_factory.mktemp("kernel-home")
    log = tmp_path_factory.mktemp("kernel-log") / "server.log"
    with running_kernel_server(home, log) as server:
        yield server


@pytest.fixture(scope="module")
def home(kernel_server: Daemon) -> Path:
    """The default cwd of the server's contexts."""
    return kernel_server.cwd


@pytest.fixture
def sandbox(kernel_server: Daemon) -> Sandbox:
    return Sandbox.create(debug=True, sandbox_url=kernel_server.url)


def needs(program: str) -> pytest.MarkDecorator:
    """Skip unless `program` is installed (JS/TS and R kernels are template packages)."""
    return pytest.mark.skipif(
        shutil.which(program) is None, reason=f"{program} is not installed on this machine"
    )
