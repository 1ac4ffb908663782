"""The host's device nodes stay the host's: starting, pausing and restoring sandboxes
never hands them to a sandbox's user."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from backend_harness import SandboxFactory

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

_NULL = "/dev/null"


@pytest.fixture
def host_null() -> Iterator[os.stat_result]:
    """The host's /dev/null as it was; put back if a test changed it (a failed test must
    not leave the machine broken)."""
    before = os.stat(_NULL)
    yield before
    now = os.stat(_NULL)
    if (now.st_uid, now.st_gid, now.st_mode) != (before.st_uid, before.st_gid, before.st_mode):
        os.chown(_NULL, before.st_uid, before.st_gid)
        os.chmod(_NULL, before.st_mode & 0o7777)


async def test_sandbox_root_cannot_take_the_hosts_dev_null(
        make_sandbox: SandboxFactory, host_null: os.stat_result) -> None:
    """A started sandbox leaves the host's /dev/null owned by host root, so root inside
    can neither chmod nor chown it (which would break it for the whole host)."""
    sbx = await make_sandbox()
    after = os.stat(_NULL)
    assert (after.st_uid, after.st_gid) == (host_null.st_uid, host_null.st_gid) == (0, 0)
    attempt = await sbx.run("chmod 000 /dev/null 2>&1; chown root /dev/null 2>&1; echo done",
                            user="root")
    assert "done" in attempt.stdout
    assert attempt.stdout.count("Operation not permitted") == 2, attempt.stdout
    assert os.stat(_NULL).st_mode == host_null.st_mode
