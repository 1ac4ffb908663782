"""What ``/init`` teaches envd: access token, sandbox-wide env vars, default user and workdir.

One ``EnvdState`` lives for the daemon's lifetime and is shared by every route and RPC.
``/init`` may be called again (a pooled sandbox is initialised once at boot and again when
it is handed out); env vars are merged, the other fields replaced when present. Under a
keeper (``_keeper``) each applied ``/init`` is also written to it (``forward``) before
envd answers, so an envd the keeper restarts starts with the same state.

Loaded by the bootstrap front, so it avoids ``dataclasses``/``typing`` at run time
(together ~10 ms of imports on a small sandbox).
"""

from __future__ import annotations

from bac_envd._errors import InitError


class EnvdState:
    __slots__ = ("access_token", "default_user", "default_workdir", "env_vars", "forward")

    def __init__(self) -> None:
        self.access_token: str | None = None
        self.env_vars: dict[str, str] = {}
        self.default_user: str | None = None
        self.default_workdir: str | None = None
        self.forward: int | None = None  # the keeper's pipe (fd), when there is one

    def token_matches(self, presented: str | None) -> bool:
        """True when no token is configured or ``presented`` equals it (constant time)."""
        if self.access_token is None:
            return True
        if presented is None:
            return False
        import hmac

        return hmac.compare_digest(presented.encode(), self.access_token.encode())

    def apply_init(self, body: object, *, forward: bool = True) -> None:
        """Validate a decoded ``/init`` JSON body completely, then apply it (and, with
        ``forward``, hand it to the keeper)."""
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
        trust = _optional_str(body, "bacTrust")
        if trust:
            # The host's relay CA for this sandbox (Bac): into the trust store, as root.
            from bac_envd._trust import install_text

            try:
                install_text(trust, "relay", new=True)
            except (OSError, UnicodeError) as exc:
                raise InitError(f"adding bacTrust to the trust store failed: {exc}") from exc

        if env_vars:
            self.env_vars.update(env_vars)
        if token is not None:
            # An empty token switches the check off, as an absent one does.
            self.access_token = token or None
        if user is not None:
            self.default_user = user or None
        if workdir is not None:
            self.default_workdir = workdir or None
        if forward and self.forward is not None:
            _write_frame(self.forward, _encode(token, env_vars, user, workdir))


def _encode(token: str | None, env_vars: dict[str, str] | None, user: str | None,
            workdir: str | None) -> bytes:
    """The applied fields as an ``/init`` body (``_json``: no ``json`` import here)."""
    from _json import encode_basestring_ascii as quote

    parts = [f"{quote(key)}:{quote(value)}" for key, value in
             (("accessToken", token), ("defaultUser", user), ("defaultWorkdir", workdir))
             if value is not None]
    if env_vars:
        pairs = ",".join(f"{quote(k)}:{quote(v)}" for k, v in env_vars.items())
        parts.append(f'"envVars":{{{pairs}}}')
    return ("{" + ",".join(parts) + "}").encode()


def _write_frame(fd: int, body: bytes) -> None:
    import os

    frame = len(body).to_bytes(4, "big") + body
    try:
        while frame:
            frame = frame[os.write(fd, frame):]
    except OSError:
        pass  # no keeper reading any more: the sandbox is ending


def _optional_str(body: dict[str, object], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise InitError(f"{key} must be a string")
    return value
