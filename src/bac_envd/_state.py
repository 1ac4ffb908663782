"""What ``/init`` teaches envd: access token, sandbox-wide env vars, default user and workdir.

One ``EnvdState`` lives for the daemon's lifetime and is shared by every route and RPC.
``/init`` may be called again (a pooled sandbox is initialised once at boot and again when
it is handed out); env vars are merged, the other fields replaced when present.

Loaded by the bootstrap front, so it avoids ``dataclasses``/``typing`` at run time
(together ~10 ms of imports on a small sandbox).
"""

from __future__ import annotations

from bac_envd._errors import InitError


class EnvdState:
    __slots__ = ("access_token", "default_user", "default_workdir", "env_vars")

    def __init__(self) -> None:
        self.access_token: str | None = None
        self.env_vars: dict[str, str] = {}
        self.default_user: str | None = None
        self.default_workdir: str | None = None

    def token_matches(self, presented: str | None) -> bool:
        """True when no token is configured or ``presented`` equals it (constant time)."""
        if self.access_token is None:
            return True
        if presented is None:
            return False
        import hmac

        return hmac.compare_digest(presented.encode(), self.access_token.encode())

    def apply_init(self, body: object) -> None:
        """Validate a decoded ``/init`` JSON body completely, then apply it."""
        if body is None:
            return
        if not isinstance(body, dict):
            raise InitError("init body must be a JSON object")
        token = _optional_str(body, "accessToken")
        user = _optional_str(body, "defaultUser")
        workdir = _optional_str(body, "defaultWorkdir")
        env_vars = body.get("envVars")
        if env_vars is not None:
            if not isinstance(env_vars, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()
            ):
                raise InitError("envVars must be an object of strings")
            if any(not k or "=" in k or "\0" in k or "\0" in v for k, v in env_vars.items()):
                raise InitError("envVars keys must be non-empty without '=' or NUL")
        if workdir and not workdir.startswith("/"):
            raise InitError("defaultWorkdir must be an absolute path")

        if env_vars:
            self.env_vars.update(env_vars)
        if token is not None:
            # An empty token switches the check off, as an absent one does.
            self.access_token = token or None
        if user is not None:
            self.default_user = user or None
        if workdir is not None:
            self.default_workdir = workdir or None


def _optional_str(body: dict[str, object], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise InitError(f"{key} must be a string")
    return value
