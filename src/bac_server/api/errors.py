"""API error responses: every error is JSON ``{"code": <status>, "message": "..."}``.

The official SDK parses that body for every documented status before mapping the error, so
a non-JSON error body would crash it. ``Should-Retry: false`` goes on every error that a retry
cannot fix (all 4xx, and 5xx that are not transient), because the SDK otherwise retries 429,
502, 503 and 504 with backoff.

Error tree (server side, REST transport)::

    ApiError                 a transport-level rejection with its status
    ├── BadRequest           400  malformed JSON, wrong types, unknown fields, bad query
    ├── Forbidden            403  the admin API asked with a team's key, or while it is off
    └── PayloadTooLarge      413  body over the limit (the message names it)

Control-plane errors (:mod:`bac_server.control.errors`) are mapped here, once; so is
the store's ``StoreUnavailable`` (the database cannot be reached: 503, worth a retry; the
database's address goes to the log, never to the caller).
"""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from bac_server.control import (
    CapReached,
    Conflict,
    ControlError,
    InvalidRequest,
    NotFound,
    NotSupported,
    OutOfCapacity,
    PauseFailed,
    QuotaExceeded,
    ResumeFailed,
    SandboxCreateFailed,
    TeamLimitExceeded,
    Unauthenticated,
)
from bac_server.store import StoreUnavailable

log = logging.getLogger(__name__)


class ApiError(Exception):
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ApiError):
    status = 400


class Forbidden(ApiError):
    status = 403


class PayloadTooLarge(ApiError):
    status = 413


_CONTROL_STATUS: tuple[tuple[type[ControlError], int], ...] = (
    (InvalidRequest, 400),
    (Unauthenticated, 401),
    (NotFound, 404),
    (Conflict, 409),
    (CapReached, 403),
    (TeamLimitExceeded, 429),
    (QuotaExceeded, 507),
    (NotSupported, 501),
    (SandboxCreateFailed, 500),
    (OutOfCapacity, 503),
    (PauseFailed, 500),
    (ResumeFailed, 500),
)


def error_response(status: int, message: str, *, retry: bool = False) -> JSONResponse:
    headers = {"Should-Retry": "true" if retry else "false"}
    return JSONResponse({"code": status, "message": message}, status, headers=headers)


def status_of(exc: ControlError) -> int:
    for cls, status in _CONTROL_STATUS:
        if isinstance(exc, cls):
            return status
    return 500


async def on_api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message)


async def on_control_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ControlError)
    return error_response(status_of(exc), str(exc), retry=isinstance(exc, OutOfCapacity))


async def on_http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, exc.detail)


async def on_store_unavailable(request: Request, exc: Exception) -> Response:
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    return error_response(503, "the server's database is unavailable; try again later",
                          retry=True)


async def on_client_gone(request: Request, _exc: Exception) -> Response:
    # Nobody reads this answer: the client closed its connection before its body came.
    log.info("%s %s: the client closed the connection before its request's body arrived",
             request.method, request.url.path)
    return error_response(400, "the request's body did not arrive")


async def on_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal server error")


HANDLERS = {
    ApiError: on_api_error,
    ControlError: on_control_error,
    HTTPException: on_http_error,
    StoreUnavailable: on_store_unavailable,
    ClientDisconnect: on_client_gone,
    Exception: on_unexpected,
}
