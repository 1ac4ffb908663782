"""Turning envd's answers (Connect errors, HTTP errors, dropped connections) into SDK errors.

Envd sits behind the server's gateway. When the sandbox is gone the gateway answers
502 with a message containing "was not found"; when the sandbox runs but the port is
closed, "port is not open". A connection that drops mid-stream says nothing about the
sandbox, so the caller's health probe decides between "gone" and "unreachable".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import NoReturn

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from pyqwest import ReadError, StreamError, WriteError

from bac import _errors as e

SANDBOX_GONE = "was not found"
PORT_CLOSED = "port is not open"

HealthProbe = Callable[[], Awaitable[bool]]

# What a plain HTTP status (a gateway answering instead of envd) means as a Connect code.
STATUS_CODES: dict[int, Code] = {
    400: Code.INVALID_ARGUMENT,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.NOT_FOUND,
    409: Code.ALREADY_EXISTS,
    413: Code.RESOURCE_EXHAUSTED,
    429: Code.RESOURCE_EXHAUSTED,
    499: Code.CANCELED,
    500: Code.INTERNAL,
    501: Code.UNIMPLEMENTED,
    502: Code.UNAVAILABLE,
    503: Code.UNAVAILABLE,
    504: Code.DEADLINE_EXCEEDED,
}

_CODE_ERRORS: dict[Code, type[e.SandboxError]] = {
    Code.INVALID_ARGUMENT: e.InvalidArgumentError,
    Code.FAILED_PRECONDITION: e.InvalidArgumentError,
    Code.OUT_OF_RANGE: e.InvalidArgumentError,
    Code.UNAUTHENTICATED: e.AuthenticationError,
    Code.PERMISSION_DENIED: e.PermissionDeniedError,
    Code.NOT_FOUND: e.NotFoundError,
    Code.ALREADY_EXISTS: e.AlreadyExistsError,
    Code.RESOURCE_EXHAUSTED: e.RateLimitError,
    Code.DEADLINE_EXCEEDED: e.TimeoutError,
    Code.CANCELED: e.TimeoutError,
}

_TRANSPORT_FAILURES = (OSError, ReadError, WriteError, StreamError)


def plain_http_error(status: int, content_type: str, body: bytes) -> ConnectError | None:
    """A Connect error for a non-Connect error response; None if connectrpc can parse it.

    A Connect error body has a string ``code``; the gateway's JSON errors carry the HTTP
    status as an int ``code``. Without this, connectrpc would read a gateway 404 as
    ``unimplemented`` and lose the "was not found" distinction.
    """
    message = ""
    if content_type.split(";", 1)[0].strip().lower() == "application/json":
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            code = parsed.get("code")
            if isinstance(code, str) and code in {c.value for c in Code}:
                return None
            if isinstance(code, int) and not isinstance(code, bool):
                status = code
            if isinstance(parsed.get("message"), str):
                message = parsed["message"]
    text = message or body.decode("utf-8", "replace").strip()[:200] or f"HTTP {status}"
    return ConnectError(STATUS_CODES.get(status, Code.UNKNOWN), text)


def unavailable(message: str) -> e.SandboxError:
    """The error for a 502/unavailable answer, judged by the gateway's message."""
    if SANDBOX_GONE in message:
        return e.SandboxNotRunningError(
            f"{message}: the sandbox was killed or reached its timeout "
            "(extend it with set_timeout)"
        )
    if PORT_CLOSED in message:
        return e.SandboxUnreachableError(f"{message}: envd inside the sandbox is not answering")
    return e.SandboxUnreachableError(f"{message}: the sandbox could not be reached")


def _is_transport_failure(exc: ConnectError) -> bool:
    return isinstance(exc.__cause__, _TRANSPORT_FAILURES) and exc.code is not Code.DEADLINE_EXCEEDED


def _ambiguous(exc: ConnectError) -> bool:
    return exc.code is Code.UNAVAILABLE and SANDBOX_GONE not in exc.message and (
        PORT_CLOSED not in exc.message
    )


def rpc_error(
    exc: ConnectError, not_found: type[e.SandboxError] = e.NotFoundError
) -> e.SandboxError:
    """The SDK error for a Connect error whose meaning is in its code and message."""
    if exc.code is Code.UNAVAILABLE:
        return unavailable(exc.message)
    if exc.code is Code.NOT_FOUND:
        return not_found(exc.message)
    cls = _CODE_ERRORS.get(exc.code)
    if cls is None:
        return e.ServerError(f"{exc.code.value}: {exc.message}")
    if cls is e.PermissionDeniedError:
        return e.permission_denied(exc.message)
    if cls is e.AuthenticationError:
        return e.authentication_failed(exc.message)
    return cls(exc.message)


async def translate(
    exc: BaseException,
    probe: HealthProbe | None = None,
    not_found: type[e.SandboxError] = e.NotFoundError,
) -> BaseException:
    """The exception to raise for anything an envd RPC raised.

    Cancellation stays cancellation (connectrpc wraps it in ``canceled``); errors that
    are already SDK errors pass through; a dropped connection asks ``probe``.
    """
    if isinstance(exc, e.SandboxError | asyncio.CancelledError):
        return exc
    if not isinstance(exc, ConnectError):
        return exc
    if isinstance(exc.__cause__, asyncio.CancelledError):
        return exc.__cause__
    if probe is not None and (_is_transport_failure(exc) or _ambiguous(exc)):
        try:
            running = await probe()
        except e.SandboxError as probe_error:
            return e.SandboxUnreachableError(
                f"{exc.message}: the sandbox could not be reached and its health check "
                f"failed too ({probe_error})"
            )
        if not running:
            return e.SandboxNotRunningError(
                f"{exc.message}: the sandbox was killed or reached its timeout while the "
                "request was in flight"
            )
        if _is_transport_failure(exc):
            return e.SandboxUnreachableError(f"connection to the sandbox lost: {exc.message}")
    return rpc_error(exc, not_found)


def http_error(status: int, content_type: str, body: bytes, what: str) -> e.SandboxError:
    """The SDK error for a failed envd HTTP call (``/files``, ``/health``)."""
    converted = plain_http_error(status, content_type, body)
    message = converted.message if converted is not None else body.decode("utf-8", "replace")
    if status == 507:
        return e.NotEnoughSpaceError(f"{what}: {message}", status_code=status)
    if status == 404:
        return e.PathNotFoundError(f"{what}: {message}", status_code=status)
    if status == 502:
        return unavailable(message)
    cls = {
        400: e.InvalidArgumentError,
        401: e.AuthenticationError,
        403: e.PermissionDeniedError,
        406: e.InvalidArgumentError,
        413: e.InvalidArgumentError,
        429: e.RateLimitError,
        504: e.TimeoutError,
    }.get(status, e.ServerError)
    if cls is e.PermissionDeniedError:
        return e.permission_denied(f"{what}: {status} {message}", status_code=status)
    if cls is e.AuthenticationError:
        return e.authentication_failed(f"{what}: {status} {message}", status_code=status)
    return cls(f"{what}: {status} {message}", status_code=status)


async def reraise(
    exc: BaseException,
    probe: HealthProbe | None = None,
    not_found: type[e.SandboxError] = e.NotFoundError,
) -> NoReturn:
    """Raise the translation of ``exc`` (chained to it), or ``exc`` itself if unchanged."""
    failure = await translate(exc, probe, not_found)
    if failure is exc:
        raise exc
    raise failure from exc
