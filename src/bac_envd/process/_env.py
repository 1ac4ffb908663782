"""The environment a started command gets (E2B envd's rule, request values win)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from bac_envd._users import User

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class BadEnvironment(ValueError):
    """An env var name or value that cannot be passed to execve."""


def build_env(
    user: User,
    sandbox_env: Mapping[str, str],
    request_env: Mapping[str, str],
    path: str | None = None,
) -> dict[str, str]:
    """PATH (envd's own) + HOME/USER/LOGNAME of ``user`` + sandbox env + request env."""
    env = {
        "PATH": path if path is not None else os.environ.get("PATH") or DEFAULT_PATH,
        "HOME": user.home,
        "USER": user.name,
        "LOGNAME": user.name,
    }
    env.update(sandbox_env)
    for key, value in request_env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise BadEnvironment(f"invalid environment variable {key!r}")
        env[key] = value
    return env
