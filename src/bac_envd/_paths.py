"""Path resolution shared by every RPC and ``/files`` (E2B's ExpandAndResolve rules).

Empty ⇒ default workdir (else home); ``~`` and ``~/x`` ⇒ the user's home; relative ⇒
joined with the user's home (not the process cwd); absolute ⇒ itself. Results are
cleaned (``..`` collapsed lexically). envd runs inside the sandbox's mount namespace, so
every path, whatever ``..`` or symlinks it holds, names something inside the sandbox.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from bac_envd._errors import InvalidPath
from bac_envd._users import User


def resolve_path(path: str, user: User, default_workdir: str | None) -> str:
    if "\0" in path:
        raise InvalidPath("path contains a NUL byte")
    if not path and default_workdir:
        path = default_workdir
    if path.startswith("~"):
        if len(path) > 1 and path[1] != "/":
            raise InvalidPath(
                f"failed to expand path '{path}' for user '{user.name}': "
                "cannot expand user-specific home dir"
            )
        path = user.home + path[1:]
    if not posixpath.isabs(path):
        path = posixpath.join(user.home, path)
    return posixpath.normpath(path)


PathResolver = Callable[[str], str]
"""Resolves a client path for one already-selected user (raises ``InvalidPath``)."""


def resolver(user: User, default_workdir: str | None) -> PathResolver:
    def resolve(path: str) -> str:
        return resolve_path(path, user, default_workdir)

    return resolve
