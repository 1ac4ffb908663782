"""Which started commands get the PATH copy for their login shell's profile hook."""

from __future__ import annotations

import os

import pytest

from bac_envd.process._login import LOGIN_PATH_VAR, asks_for_login, ensure_hook, keep_login_path


@pytest.mark.parametrize(("args", "login"), [
    (["-l", "-c", "echo hi"], True),         # the SDKs' commands.run
    (["-i", "-l"], True),                    # the SDKs' pty.create
    (["-lc", "echo hi"], True),
    (["--login", "-c", "x"], True),
    (["-c", "ls -l"], False),                # -l inside the command string is no option
    (["-c", "x", "-l"], False),              # after the command: a positional parameter
    (["--", "-l"], False),
    (["--norc", "-c", "x"], False),
    ([], False),
])
def test_login_options_are_recognised(args: list[str], login: bool) -> None:
    """-l (alone or grouped) and --login before the first operand ask for a login shell."""
    assert asks_for_login(args) is login


def test_copy_only_for_a_login_shell_with_a_given_path() -> None:
    """The copy is the final PATH; a non-login command or an envd default PATH gets none."""
    env = {"PATH": "/given:/bin", "HOME": "/root"}
    keep_login_path(env, ["-l", "-c", "true"], path_given=True)
    assert env[LOGIN_PATH_VAR] == "/given:/bin"
    for args, given in ((["-c", "true"], True), (["-l", "-c", "true"], False)):
        env = {"PATH": "/given:/bin"}
        keep_login_path(env, args, path_given=given)
        assert LOGIN_PATH_VAR not in env


def test_hook_is_left_alone_outside_a_sandbox() -> None:
    """An envd that is not a sandbox's init never writes into the host's /etc."""
    hook = "/etc/profile.d/00-bac-login-path.sh"
    assert os.getpid() != 1 and not os.path.lexists(hook)
    ensure_hook()
    written = os.path.lexists(hook)
    if written:
        os.unlink(hook)  # the host's /etc is not ours to keep it in
    assert not written
