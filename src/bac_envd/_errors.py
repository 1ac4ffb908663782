"""envd's domain errors; the tree is drawn in the package docstring."""


class EnvdError(Exception):
    """Base class of every error envd's domain code raises."""


class InvalidPath(EnvdError):
    """The path cannot be resolved (NUL byte, ``~otheruser``, ...)."""


class UnknownUser(EnvdError):
    """The user named by the request (or the default user) does not exist."""


class InitError(EnvdError):
    """The ``/init`` request body is malformed."""
