"""The SDK's error tree: every failure a caller can see is one of these.

Errors are translated once, where they enter the SDK (the REST client, the envd RPC
client, the envd HTTP client); nothing above those boundaries inspects status codes.

::

    SandboxError                      base; ``status_code`` when an HTTP answer caused it
    ├── AuthenticationError           401, missing API key, envd ``unauthenticated``
    ├── PermissionDeniedError         403
    │   └── CapReachedError           403 naming a reached cost cap: a create it would
    │                                 cover, or a sandbox it holds paused, is refused
    ├── InvalidArgumentError          400/413/422, envd ``invalid_argument``, an
    │   │                             argument the SDK refuses before sending
    │   └── UnknownUserError          the ``user`` named has no account in the sandbox
    ├── NotFoundError                 404, envd ``not_found``
    │   ├── SandboxNotFoundError      the sandbox does not exist (or is not yours)
    │   ├── PathNotFoundError         a file or directory in the sandbox (also a
    │   │                             builtin ``FileNotFoundError``)
    │   └── ArtefactNotFoundError     no artefact of that name in that run
    ├── AlreadyExistsError            409, envd ``already_exists``
    │   └── ArtefactConflictError     other bytes were promoted under that name
    ├── RateLimitError                429, envd ``resource_exhausted``
    ├── NotEnoughSpaceError           507: the sandbox's disk, or the team's checkpoint
    │                                 or artefact quota, is full
    ├── TimeoutError                  request, command or watch deadline (also a
    │                                 builtin ``TimeoutError``)
    ├── SandboxNotRunningError        the sandbox was killed or timed out
    ├── SandboxUnreachableError       the sandbox could not be reached, state unknown
    ├── ServerUnreachableError        the Bac API could not be reached
    ├── ServerError                   5xx or an answer the SDK cannot interpret
    ├── CommandExitError              a foreground command exited non-zero
    └── (templates: DockerfileError under InvalidArgumentError, TemplateBuildError;
         see bac._template._errors)
"""

from __future__ import annotations

import builtins
import re


class SandboxError(Exception):
    """Base class of every error the SDK raises."""

    def __init__(self, message: str = "", *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code

    def __str__(self) -> str:
        return self.message


class AuthenticationError(SandboxError):
    """The API key or envd access token is missing or wrong."""


class PermissionDeniedError(SandboxError):
    """The credentials are valid but do not allow this operation."""


_CAP_ID = re.compile(r"\bcap_[A-Za-z0-9_-]+")


class CapReachedError(PermissionDeniedError):
    """A cost cap is reached: what it covers cannot be created or resumed until the cap is
    raised, deleted or its period rolls over. ``cap_id`` is the cap the server named."""

    def __init__(self, message: str = "", *, status_code: int | None = None) -> None:
        super().__init__(message, status_code=status_code)
        found = _CAP_ID.search(message)
        self.cap_id: str | None = found.group(0) if found else None


def permission_denied(message: str, *,
                      status_code: int | None = None) -> PermissionDeniedError:
    """The error for a 403 (or envd ``permission_denied``) answer: a reached cost cap is
    told apart by the server's message, which names it ("cost cap cap_... reached")."""
    cls = CapReachedError if "cost cap" in message.lower() else PermissionDeniedError
    return cls(message, status_code=status_code)


class InvalidArgumentError(SandboxError):
    """The request was rejected as malformed or out of range."""


class UnknownUserError(InvalidArgumentError):
    """The ``user`` a call named has no account in the sandbox's passwd database."""


# envd's messages for a user it cannot resolve (E2B's wire answers them as
# ``unauthenticated``/401, which the official SDK relies on; the caller's credentials are
# fine, so the SDK says what is wrong).
_UNKNOWN_USER = re.compile(r"invalid username: '([^']*)'")


def authentication_failed(message: str, *,
                          status_code: int | None = None) -> SandboxError:
    """The error for a 401 (or envd ``unauthenticated``) answer: an unknown sandbox user
    is an argument error, anything else is the credentials'."""
    found = _UNKNOWN_USER.search(message)
    if found is not None:
        return UnknownUserError(f"no user '{found.group(1)}' in the sandbox "
                                "(its /etc/passwd has no such account)",
                                status_code=status_code)
    return AuthenticationError(message, status_code=status_code)


class NotFoundError(SandboxError):
    """The thing the request named does not exist."""


class SandboxNotFoundError(NotFoundError):
    """No sandbox with this id exists for this API key's team."""


class PathNotFoundError(NotFoundError, builtins.FileNotFoundError):
    """A file or directory inside the sandbox does not exist."""

    def __init__(self, message: str = "", *, status_code: int | None = None) -> None:
        NotFoundError.__init__(self, message, status_code=status_code)

    def __str__(self) -> str:
        return self.message


class ArtefactNotFoundError(NotFoundError):
    """The run has no artefact of that name (or the run id is not the team's)."""


class AlreadyExistsError(SandboxError):
    """The thing the request would create already exists."""


class ArtefactConflictError(AlreadyExistsError):
    """Other bytes were promoted under this run and name before: an artefact is never
    replaced (promote under another name, or delete it first)."""


class RateLimitError(SandboxError):
    """Too many requests or sandboxes; retry later."""


class NotEnoughSpaceError(SandboxError):
    """The sandbox's disk is full."""


class TimeoutError(SandboxError, builtins.TimeoutError):
    """A request, command or watch ran past its deadline."""

    def __init__(self, message: str = "", *, status_code: int | None = None) -> None:
        SandboxError.__init__(self, message, status_code=status_code)

    def __str__(self) -> str:
        return self.message


class SandboxNotRunningError(SandboxError):
    """The sandbox is gone: killed, or it reached its timeout."""


class SandboxUnreachableError(SandboxError):
    """The sandbox could not be reached and is not known to be gone."""


class ServerUnreachableError(SandboxError):
    """The Bac API did not answer: wrong URL, or the server is down."""


class ServerError(SandboxError):
    """The server failed, or answered something the SDK cannot interpret."""


class CommandExitError(SandboxError):
    """A command finished with a non-zero exit code.

    Carries everything a :class:`CommandResult` carries, so callers that expect failure
    can read the output from the exception.
    """

    def __init__(
        self, *, stdout: str, stderr: str, exit_code: int, error: str | None = None
    ) -> None:
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else error or ""
        message = f"command exited with code {exit_code}"
        super().__init__(f"{message}: {detail}" if detail else message)
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code
        self.error = error
