"""Which sandbox user a request acts as, and what that user's identity is.

E2B clients select a user with ``Authorization: Basic base64("<user>:")`` on RPCs and the
``username`` query parameter on ``/files``. Without one, the default user from ``/init``
applies; without that, ``user`` when the image has it, else ``root``.
"""

from __future__ import annotations

import os
import pwd

from bac_envd._errors import UnknownUser

FALLBACK_USER = "user"


class User:
    """An account as envd resolved it. A plain class: the keeper (PID 1) resolves users
    before it forks envd, and ``dataclasses`` would bring ``inspect``, ``ast`` and
    ``enum`` into its memory (about 2.7 MiB that envd's pages, restored from a snapshot,
    no longer share)."""

    __slots__ = ("gid", "groups", "home", "name", "uid")

    def __init__(self, name: str, uid: int, gid: int, home: str,
                 groups: tuple[int, ...]) -> None:
        self.name = name
        self.uid = uid
        self.gid = gid
        self.home = home
        self.groups = groups  # supplementary groups, primary gid included

    def _key(self) -> tuple[str, int, int, str, tuple[int, ...]]:
        return (self.name, self.uid, self.gid, self.home, self.groups)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, User) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"User(name={self.name!r}, uid={self.uid}, gid={self.gid}, "
                f"home={self.home!r}, groups={self.groups})")


# Every account envd has resolved, kept so that a sandbox whose /etc/passwd was
# overwritten or truncated (``files.write("/etc/passwd", ...)`` succeeds: file calls act
# as root, as E2B's do) still answers as the users it had: the live database is asked
# first, this only when it no longer knows the name.
_known: dict[str, User] = {}


def lookup_user(name: str) -> User:
    """Resolve a user name from the sandbox's own passwd database (or, when that has lost
    an account envd resolved before, from what it resolved then)."""
    if not name or "\0" in name:
        raise UnknownUser(f"invalid username: '{name}'")
    try:
        entry = pwd.getpwnam(name)
    except KeyError as exc:
        known = _known.get(name)
        if known is not None:
            return known
        raise UnknownUser(f"invalid username: '{name}'") from exc
    try:
        groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    except OSError:
        groups = (entry.pw_gid,)
    user = User(
        name=entry.pw_name,
        uid=entry.pw_uid,
        gid=entry.pw_gid,
        home=entry.pw_dir or "/",
        groups=groups,
    )
    _known[name] = user
    return user


def remember_users() -> None:
    """Resolve root and the default user now, at start (a restarted envd inherits them
    from the keeper), so no later change to /etc/passwd can lock envd out of them."""
    for name in ("root", FALLBACK_USER):
        try:
            lookup_user(name)
        except UnknownUser:
            continue


def basic_auth_username(header: str | None) -> str | None:
    """The user name carried by an ``Authorization: Basic`` header, or None if absent."""
    if not header:
        return None
    import base64  # here: the keeper imports this module, and base64 brings re and enum
    import binascii

    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise UnknownUser("malformed basic authorization header") from exc
    name, _, _password = decoded.partition(":")
    return name


def default_username(configured: str | None) -> str:
    """The user a request without a user selection acts as."""
    if configured:
        return configured
    try:
        pwd.getpwnam(FALLBACK_USER)
    except KeyError:
        return FALLBACK_USER if FALLBACK_USER in _known else "root"
    return FALLBACK_USER


def select_user(requested: str | None, configured_default: str | None) -> User:
    """The user a request acts as: the requested one, else the default."""
    return lookup_user(requested if requested else default_username(configured_default))
