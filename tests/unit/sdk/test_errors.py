"""Every failure maps to one class of the SDK's error tree, decided once at the boundary."""

from __future__ import annotations

import asyncio
import builtins
import json

import httpx
import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

import bac
from bac import _errors as e
from bac._api import api_error
from bac._code import status_error
from bac._envd._errors import http_error, plain_http_error, rpc_error, translate


def _response(status: int, body: object, content_type: str = "application/json") -> httpx.Response:
    raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
    return httpx.Response(status, content=raw, headers={"content-type": content_type})


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, e.InvalidArgumentError),
        (401, e.AuthenticationError),
        (403, e.PermissionDeniedError),
        (404, e.SandboxNotFoundError),
        (409, e.AlreadyExistsError),
        (413, e.InvalidArgumentError),
        (429, e.RateLimitError),
        (500, e.ServerError),
        (503, e.ServerError),
        (504, e.TimeoutError),
    ],
)
def test_api_status_mapping(status: int, cls: type[e.SandboxError]) -> None:
    """An API error status becomes the matching class, keeping status and message."""
    err = api_error(_response(status, {"code": status, "message": "boom"}), e.SandboxNotFoundError)
    assert type(err) is cls
    assert err.status_code == status
    assert "boom" in str(err)


def test_a_reached_cost_cap_is_its_own_denial() -> None:
    """A 403 naming a cost cap is a CapReachedError (still a PermissionDeniedError) carrying
    the cap's id, wherever it enters the SDK; any other 403 stays a plain denial."""
    message = "sandbox not created: cost cap cap_7f3a reached (spent 1.02 of 1.00 USD)"
    body = json.dumps({"code": 403, "message": message}).encode()
    reached = [
        api_error(_response(403, {"code": 403, "message": message})),
        http_error(403, "application/json", body, "read /x"),
        rpc_error(ConnectError(Code.PERMISSION_DENIED, message)),
        status_error(403, body, "run_code"),
    ]
    for err in reached:
        assert type(err) is e.CapReachedError, err
        assert isinstance(err, e.PermissionDeniedError)
        assert err.cap_id == "cap_7f3a" and "cost cap" in str(err)
    assert reached[0].status_code == 403
    plain = api_error(_response(403, {"code": 403, "message": "key lacks the scope"}))
    assert type(plain) is e.PermissionDeniedError
    assert type(rpc_error(ConnectError(Code.PERMISSION_DENIED, "no"))) is e.PermissionDeniedError
    assert e.CapReachedError("403: Cost cap reached").cap_id is None


def test_api_error_with_non_json_body() -> None:
    """A proxy's HTML error page still yields a readable message."""
    err = api_error(_response(502, b"<h1>Bad Gateway</h1>", "text/html"))
    assert isinstance(err, e.ServerError)
    assert "Bad Gateway" in str(err)


def test_tree_shape() -> None:
    """Everything is a SandboxError; path and timeout errors also match builtins."""
    for name in bac.__all__:
        obj = getattr(bac, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, e.SandboxError), name
    assert issubclass(e.PathNotFoundError, builtins.FileNotFoundError)
    assert issubclass(e.PathNotFoundError, e.NotFoundError)
    assert issubclass(e.TimeoutError, builtins.TimeoutError)
    assert str(e.PathNotFoundError("gone")) == "gone"
    assert str(e.TimeoutError("late")) == "late"


def test_command_exit_error_carries_the_result() -> None:
    """A failed command's output stays readable from the exception."""
    err = e.CommandExitError(stdout="o", stderr="first\nlast line\n", exit_code=3, error="x")
    assert (err.stdout, err.exit_code, err.error) == ("o", 3, "x")
    assert str(err) == "command exited with code 3: last line"


@pytest.mark.parametrize(
    ("message", "cls"),
    [
        ("The sandbox was not found", e.SandboxNotRunningError),
        ("The sandbox is running but port is not open", e.SandboxUnreachableError),
        ("something else", e.SandboxUnreachableError),
    ],
)
def test_gateway_502_is_judged_by_message(message: str, cls: type[e.SandboxError]) -> None:
    """The gateway's 502 JSON tells a gone sandbox from a closed port."""
    body = json.dumps({"sandboxId": "abc", "message": message, "code": 502}).encode()
    converted = plain_http_error(502, "application/json", body)
    assert converted is not None and converted.code is Code.UNAVAILABLE
    assert type(rpc_error(converted)) is cls
    assert type(http_error(502, "application/json", body, "read")) is cls


def test_connect_error_bodies_are_left_to_connectrpc() -> None:
    """A real Connect error (string code) is not rewritten."""
    body = json.dumps({"code": "not_found", "message": "no"}).encode()
    assert plain_http_error(404, "application/json", body) is None


def test_plain_404_is_not_found_not_unimplemented() -> None:
    """A gateway's plain 404 means not found, which Connect's table would call unimplemented."""
    converted = plain_http_error(404, "text/plain", b"nope")
    assert converted is not None and converted.code is Code.NOT_FOUND
    assert converted.message == "nope"


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (Code.INVALID_ARGUMENT, e.InvalidArgumentError),
        (Code.UNAUTHENTICATED, e.AuthenticationError),
        (Code.NOT_FOUND, e.PathNotFoundError),
        (Code.ALREADY_EXISTS, e.AlreadyExistsError),
        (Code.RESOURCE_EXHAUSTED, e.RateLimitError),
        (Code.DEADLINE_EXCEEDED, e.TimeoutError),
        (Code.CANCELED, e.TimeoutError),
        (Code.INTERNAL, e.ServerError),
        (Code.UNIMPLEMENTED, e.ServerError),
    ],
)
def test_rpc_code_mapping(code: Code, cls: type[e.SandboxError]) -> None:
    """Each Connect code maps to one class; not_found becomes what the caller asked for."""
    assert type(rpc_error(ConnectError(code, "m"), e.PathNotFoundError)) is cls


def test_http_file_errors() -> None:
    """/files statuses map to path, space, auth and argument errors."""
    cases = {404: e.PathNotFoundError, 507: e.NotEnoughSpaceError, 401: e.AuthenticationError,
             400: e.InvalidArgumentError, 500: e.ServerError}
    for status, cls in cases.items():
        err = http_error(status, "application/json",
                         json.dumps({"code": status, "message": "m"}).encode(), "read /x")
        assert type(err) is cls, status
        assert err.status_code == status


async def test_dropped_connection_asks_the_health_probe() -> None:
    """A transport failure is 'not running' only when the probe says the sandbox is gone."""
    dropped = ConnectError(Code.UNAVAILABLE, "connection reset")
    dropped.__cause__ = ConnectionResetError("reset")

    async def gone() -> bool:
        return False

    async def alive() -> bool:
        return True

    async def unreachable() -> bool:
        raise e.SandboxUnreachableError("no answer")

    assert type(await translate(dropped, gone)) is e.SandboxNotRunningError
    assert type(await translate(dropped, alive)) is e.SandboxUnreachableError
    assert type(await translate(dropped, unreachable)) is e.SandboxUnreachableError


async def test_cancellation_stays_cancellation() -> None:
    """connectrpc's canceled-from-CancelledError is unwrapped back to CancelledError."""
    wrapped = ConnectError(Code.CANCELED, "Request was cancelled")
    wrapped.__cause__ = asyncio.CancelledError()
    assert isinstance(await translate(wrapped), asyncio.CancelledError)
