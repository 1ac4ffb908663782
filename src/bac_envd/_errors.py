"""envd's domain errors; the tree is drawn in the package docstring."""

from __future__ import annotations

import os


class EnvdError(Exception):
    """Base class of every error envd's domain code raises."""


class InvalidPath(EnvdError):
    """The path cannot be resolved (NUL byte, ``~otheruser``, ...)."""


class UnknownUser(EnvdError):
    """The user named by the request (or the default user) does not exist."""


class InitError(EnvdError):
    """The ``/init`` request body is malformed."""


def os_error_text(exc: BaseException) -> str:
    """What went wrong, as a person reads it: ``/proc/version: permission denied`` (the
    shape of E2B's envd's errors), not Python's ``[Errno 13] Permission denied:
    '/proc/version'``. Anything but an ``OSError`` with an errno is its own text."""
    if not isinstance(exc, OSError) or not exc.strerror:
        return str(exc)
    reason = exc.strerror[:1].lower() + exc.strerror[1:]
    if exc.filename is None:
        return reason
    name = exc.filename
    where = os.fsdecode(name) if isinstance(name, str | bytes) else str(name)
    if exc.filename2 is not None:
        where += f" -> {os.fsdecode(exc.filename2)}"
    return f"{where}: {reason}"
