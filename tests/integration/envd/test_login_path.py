"""A PATH given to a sandbox or a command survives the login shell's /etc/profile, in real
base-template sandboxes through the official e2b SDK; without one nothing changes."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from e2b import CommandResult, PtySize

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))

from backend_fixtures import backend, backend_factory, data_dir, make_sandbox, template
from backend_harness import Sandbox, SandboxFactory

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]
__all__ = ["backend", "backend_factory", "data_dir", "make_sandbox", "template"]

# What Debian's /etc/profile sets, for root and for everyone else.
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USER_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
HOOK = "/etc/profile.d/00-bac-login-path.sh"
TOOL_DIR = "/opt/tools/bin"
GIVEN = f"{TOOL_DIR}:/usr/bin:/bin"
# The PATH, whether the private copy leaked into the command, and where `mytool` is.
PROBE = ('echo "$PATH"; echo "copy=${BAC_LOGIN_PATH-unset}"; '
         'command -v mytool || echo none')


async def run(box: Sandbox, cmd: str, user: str, envs: dict[str, str] | None = None
              ) -> CommandResult:
    result: CommandResult = await box.sdk.commands.run(cmd, user=user, envs=envs)
    assert result.exit_code == 0, result
    return result


async def install_tool(box: Sandbox) -> None:
    await run(box, f"mkdir -p {TOOL_DIR} && printf '#!/bin/sh\\necho tool\\n' > "
                   f"{TOOL_DIR}/mytool && chmod 755 {TOOL_DIR}/mytool", "root")


async def probe(box: Sandbox, user: str, envs: dict[str, str] | None = None) -> list[str]:
    return (await run(box, PROBE, user, envs)).stdout.splitlines()


async def test_base_sandbox_keeps_the_profiles_path(make_sandbox: SandboxFactory) -> None:
    """Nothing gives a PATH: root and user get /etc/profile's, and no hook is written."""
    box = await make_sandbox()
    await install_tool(box)
    assert await probe(box, "user") == [USER_PATH, "copy=unset", "none"]
    assert await probe(box, "root") == [ROOT_PATH, "copy=unset", "none"]
    hook = await run(box, f"test -e {HOOK} && echo present || echo absent", "root")
    assert hook.stdout.strip() == "absent"


async def test_command_path_survives_the_login_shell(make_sandbox: SandboxFactory) -> None:
    """A command's own PATH reaches it through bash -l for user and root; the copy does not."""
    box = await make_sandbox()
    await install_tool(box)
    for user in ("user", "root"):
        lines = await probe(box, user, {"PATH": GIVEN})
        assert lines == [GIVEN, "copy=unset", f"{TOOL_DIR}/mytool"], user
    listing = await run(box, f"stat -c '%U %a' {HOOK}", "root")
    assert listing.stdout.strip() == "root 644"


async def test_sandbox_path_survives_and_a_command_path_wins(
        make_sandbox: SandboxFactory) -> None:
    """The sandbox's PATH env var reaches every command; a command's PATH beats it."""
    box = await make_sandbox(env_vars={"PATH": GIVEN})
    await install_tool(box)
    for user in ("user", "root"):
        assert await probe(box, user) == [GIVEN, "copy=unset", f"{TOOL_DIR}/mytool"], user
        mine = "/usr/bin:/bin"
        assert await probe(box, user, {"PATH": mine}) == [mine, "copy=unset", "none"], user


async def test_terminal_gets_the_sandbox_path(make_sandbox: SandboxFactory) -> None:
    """An interactive login shell (sandbox.pty) starts with the sandbox's PATH too."""
    box = await make_sandbox(env_vars={"PATH": GIVEN})
    output = bytearray()
    terminal = await box.sdk.pty.create(PtySize(rows=24, cols=200), on_data=output.extend,
                                        user="user")
    await box.sdk.pty.send_stdin(terminal.pid, b'echo "@@$PATH@@"; exit\n')
    await asyncio.wait_for(terminal.wait(), 30)
    # The typed line echoes back as written; only the command's output has a path in it.
    assert re.findall(r"@@(/[^@]*)@@", output.decode(errors="replace")) == [GIVEN]


async def test_removed_hook_is_written_again(make_sandbox: SandboxFactory) -> None:
    """The hook is ensured on every login shell given a PATH, not only on the first."""
    box = await make_sandbox()
    await install_tool(box)
    assert (await probe(box, "user", {"PATH": GIVEN}))[0] == GIVEN
    await run(box, f"rm {HOOK}", "root")
    assert (await probe(box, "user", {"PATH": GIVEN}))[0] == GIVEN
