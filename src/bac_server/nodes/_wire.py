"""What API replicas and node agents send each other: the backend contract's records as
JSON (pydantic reads and writes the dataclasses as they are), and errors as
``{"code", "message"}`` where the code names the backend error, so a replica raises on its
side the error the node's backend raised on its own.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from bac_server.backends.base import (
    BackendError,
    BuildStep,
    CheckpointFailed,
    CheckpointInfo,
    CheckpointNotFound,
    ResourceLimitError,
    ResourceUsage,
    SandboxEndpoint,
    SandboxNotFound,
    SandboxSetupError,
    SandboxSpec,
    ServiceNotReady,
    TemplateNotFound,
    VolumeMountFailed,
)
from bac_server.backends.egress import EgressPolicy, NetworkUsage

SPEC = TypeAdapter(SandboxSpec)
ENDPOINT = TypeAdapter(SandboxEndpoint)
USAGE = TypeAdapter(ResourceUsage)
NETWORK_USAGE = TypeAdapter(NetworkUsage)
CHECKPOINT = TypeAdapter(CheckpointInfo)
POLICY = TypeAdapter(EgressPolicy)
BUILD_STEP = TypeAdapter(BuildStep)

# The errors a node's answer may carry, by code, with the HTTP status it is sent with.
_ERRORS: dict[str, tuple[type[BackendError], int]] = {
    cls.__name__: (cls, status) for cls, status in (
        (SandboxNotFound, 404), (CheckpointNotFound, 404), (TemplateNotFound, 404),
        (ResourceLimitError, 400), (VolumeMountFailed, 409), (SandboxSetupError, 500),
        (CheckpointFailed, 500), (ServiceNotReady, 500), (BackendError, 500))
}


def error_body(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and body a node answers an error with (the nearest known class; an
    ``OSError`` with its errno: the volume calls' callers act on it)."""
    if isinstance(exc, OSError):
        return 500, {"code": "OSError", "errno": exc.errno or 0, "message": exc.strerror
                     or str(exc)}
    for cls in type(exc).__mro__:
        known = _ERRORS.get(cls.__name__)
        if known is not None and known[0] is cls:
            return known[1], {"code": cls.__name__, "message": str(exc)}
    return 500, {"code": "BackendError", "message": f"{type(exc).__name__}: {exc}"}


def error_of(body: Any, status: int) -> Exception:
    """The error a replica raises for a node's error answer."""
    if isinstance(body, dict):
        if body.get("code") == "OSError":
            return OSError(int(body.get("errno") or 0), str(body.get("message", "")))
        known = _ERRORS.get(str(body.get("code")))
        message = str(body.get("message", ""))
        if known is not None:
            return known[0](message)
        return BackendError(f"node answered {status}: {message}")
    return BackendError(f"node answered {status}")
