"""A PATH given to a login shell survives the shell's ``/etc/profile``.

The SDKs start every command as ``/bin/bash -l -c <cmd>`` and every terminal as
``/bin/bash -i -l``. A login shell reads ``/etc/profile``, and Debian's (like most
distributions') sets PATH outright, dropping the PATH the template's ENV, the sandbox's
env vars or the command's own envs gave. So when a login shell is started with a PATH
from one of those, envd also passes it as ``BAC_LOGIN_PATH`` and makes sure the sandbox
has ``/etc/profile.d/00-bac-login-path.sh``, which ``/etc/profile`` sources right after
its reset: the hook puts that PATH back and unsets the copy, so nothing below the shell
inherits it. What the login reads after it (``~/.profile`` adding ``~/.local/bin``) still
applies, as in any login. Without a given PATH nothing is passed and the hook does
nothing: root and users get the profile's PATH as before.

Why not ``BASH_ENV``: an interactive shell (a terminal) never reads it, and every script
below the command would inherit and re-run it.

The hook is written only by envd running as a sandbox's init (PID 1), whose root file
system is the sandbox's own; an envd run on a host (development, tests) leaves ``/etc``
alone. A hook that cannot be written costs only the PATH: the command still starts.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from bac_envd import _keeper

LOGIN_PATH_VAR = "BAC_LOGIN_PATH"
HOOK_DIR = "/etc/profile.d"
HOOK_NAME = "00-bac-login-path.sh"  # first of profile.d: later scripts may still add to it
HOOK = b"""\
# Written by the sandbox's envd: /etc/profile has just reset PATH; put back the PATH
# the template, the sandbox or the command set (passed as BAC_LOGIN_PATH).
if [ -n "${BAC_LOGIN_PATH+x}" ]; then
    PATH=$BAC_LOGIN_PATH
    export PATH
    unset BAC_LOGIN_PATH
fi
"""


def asks_for_login(args: Sequence[str]) -> bool:
    """Whether a shell's options ask for a login shell: ``-l`` (alone or in a group such
    as ``-lc``) or ``--login``, before the first operand."""
    for arg in args:
        if arg == "--login":
            return True
        if arg in ("-", "--") or not arg.startswith("-") or arg.startswith("--"):
            return False
        if "l" in arg[1:]:
            return True
    return False


def keep_login_path(env: dict[str, str], args: Sequence[str], path_given: bool) -> None:
    """For a login shell with a PATH given (by the sandbox's or the command's env vars),
    pass ``env``'s PATH also under ``LOGIN_PATH_VAR`` and ensure the hook."""
    if path_given and asks_for_login(args):
        env[LOGIN_PATH_VAR] = env["PATH"]
        ensure_hook()


def ensure_hook() -> None:
    """Write the hook unless it is there as it should be; errors only go to stderr."""
    if not _keeper.kept():  # only the sandbox's envd writes the sandbox's files
        return
    path = os.path.join(HOOK_DIR, HOOK_NAME)
    temporary = os.path.join(HOOK_DIR, f".{HOOK_NAME}.new")
    try:
        if _read(path) == HOOK:
            return
        os.makedirs(HOOK_DIR, mode=0o755, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)  # left by an envd that died while writing it
        # SECURITY: envd is root inside the sandbox; O_NOFOLLOW and O_EXCL keep a link
        # planted at the temporary name from redirecting the write (the sandbox's own
        # file system is all it can reach either way), and the rename replaces a link at
        # the hook's name instead of following it.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644)
        try:
            os.fchmod(fd, 0o644)
            os.write(fd, HOOK)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError as exc:
        print(f"bac_envd: cannot write {path} (a login shell's PATH falls back to "
              f"/etc/profile's): {exc}", file=sys.stderr)


def _read(path: str) -> bytes | None:
    try:
        # O_NONBLOCK: a FIFO planted there must not hold up envd.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, len(HOOK) + 1)
    finally:
        os.close(fd)
