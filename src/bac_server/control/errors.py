"""Errors the control plane raises; the API maps each class to one HTTP status.

Error tree (server side, control plane)::

    ControlError
    ├── InvalidRequest          400  a value is out of range; the message names the limit
    ├── NotSupported            501  the feature needs a capability this server lacks
    ├── Unauthenticated         401  missing, unknown or revoked API key
    ├── NotFound                404
    │   ├── SandboxNotFoundError    unknown, ended, or another team's sandbox
    │   └── TemplateNotFoundError   no template with that id or alias
    ├── Conflict                409  the sandbox is not in a state that allows this
    ├── CapReached              403  a cost cap covering it is reached (create, resume)
    ├── TeamLimitExceeded       429  the team runs as many sandboxes as it may
    ├── QuotaExceeded           507  the team's checkpoints use all the disk it may
    ├── SandboxCreateFailed     500  the backend could not make the sandbox
    ├── OutOfCapacity           503  no machine can take the sandbox now, or the one it
    │                                is on does not answer (retry later)
    ├── PauseFailed             500  its state could not be saved; it was not paused
    └── ResumeFailed            500  its state could not be restored; it stays paused
"""

from __future__ import annotations


class ControlError(Exception):
    """Base class of every control-plane failure."""


class InvalidRequest(ControlError):
    pass


class NotSupported(ControlError):
    pass


class Unauthenticated(ControlError):
    pass


class NotFound(ControlError):
    pass


class SandboxNotFoundError(NotFound):
    def __init__(self, sandbox_id: str) -> None:
        super().__init__(f"sandbox {sandbox_id!r} not found")
        self.sandbox_id = sandbox_id


class TemplateNotFoundError(NotFound):
    def __init__(self, template: str) -> None:
        super().__init__(f"template {template!r} not found")
        self.template = template


class Conflict(ControlError):
    pass


class CapReached(ControlError):
    """A cost cap covering the sandbox is reached: it is not created, or not resumed,
    until the cap is raised, deleted or its period ends."""


class TeamLimitExceeded(ControlError):
    pass


class QuotaExceeded(ControlError):
    pass


class SandboxCreateFailed(ControlError):
    pass


class PauseFailed(ControlError):
    pass


class ResumeFailed(ControlError):
    pass


class OutOfCapacity(ControlError):
    """No machine can take the sandbox now (several nodes, all full or away), or the
    machine a call needs does not answer (its node lost): retry later."""
