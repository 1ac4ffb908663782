"""The connection to one sandbox's envd: Connect RPC clients and an HTTP client.

Every request carries the routing headers the gateway needs (``E2b-Sandbox-Id``,
``E2b-Sandbox-Port``) and the sandbox's access token. RPCs use ``connectrpc`` with a
proto3 JSON codec that ignores unknown fields, so a newer envd adding fields does not
break this SDK; plain HTTP (files, health) uses httpx.
"""

from __future__ import annotations

import asyncio
import base64
import math
from typing import Any, TypeVar

import httpx
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from pyqwest import Client, Request, Response, Transport, WriteError, get_default_transport

from bac import _errors as e
from bac._config import ENVD_PORT, ConnectionConfig, http_client, seconds
from bac._envd._errors import SANDBOX_GONE, http_error, plain_http_error
from bac._version import USER_AGENT
from bac_protocol.envd import filesystem_connect, process_connect

KEEPALIVE_HEADER = "Keepalive-Ping-Interval"
KEEPALIVE_SECONDS = 50
HEALTH_TIMEOUT = 5.0

_M = TypeVar("_M")


class JsonCodec:
    """proto3 JSON, tolerant of fields this SDK does not know yet."""

    def name(self) -> str:
        return "json"

    def encode(self, message: Any) -> bytes:
        return str(message.to_json()).encode()

    def decode(self, data: bytes | bytearray, message_class: type[_M]) -> _M:
        try:
            decoded: _M = message_class.from_json(  # type: ignore[attr-defined]
                bytes(data), ignore_unknown_fields=True
            )
        except Exception as exc:
            raise ConnectError(
                Code.INTERNAL, f"envd sent an undecodable {message_class.__name__}: {exc}"
            ) from exc
        return decoded


class _PlainErrorTransport:
    """Raises non-Connect error responses (from the gateway) as Connect errors."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner

    async def execute(self, request: Request) -> Response:
        try:
            response = await self._inner.execute(request)
        except WriteError:
            # A pooled keep-alive connection the server closed as we reused it (e.g. after
            # answering 401 without reading a body). The request never reached the
            # server, so a body we still hold (unary calls) is safe to send again.
            if not isinstance(request.content, bytes):
                raise
            response = await self._inner.execute(
                Request(request.method, request.url, request.headers, request.content)
            )
        if response.status < 400:
            return response
        body = bytearray()
        async for chunk in response.content:
            body.extend(chunk)
        error = plain_http_error(
            response.status, response.headers.get("content-type", ""), bytes(body)
        )
        if error is not None:
            raise error
        return Response(status=response.status, headers=response.headers, content=bytes(body))


def user_header(user: str | None) -> dict[str, str]:
    """How envd learns which user to act as: HTTP Basic with an empty password."""
    if not user:
        return {}
    token = base64.b64encode(f"{user}:".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def timeout_ms(value: float | None, name: str = "timeout") -> int | None:
    """Connect's deadline header value; 0, infinity or None means no deadline. A value
    that is not a duration raises ``InvalidArgumentError`` naming ``name``."""
    checked = seconds(value, name)
    return int(checked * 1000) if checked and not math.isinf(checked) else None


class EnvdConnection:
    """Everything needed to talk to the envd of one sandbox."""

    def __init__(
        self, config: ConnectionConfig, sandbox_id: str, access_token: str | None
    ) -> None:
        self.config = config
        self.sandbox_id = sandbox_id
        self.access_token = access_token
        self.base_url = config.envd_url()
        headers = {
            "E2b-Sandbox-Id": sandbox_id,
            "E2b-Sandbox-Port": str(ENVD_PORT),
            "User-Agent": USER_AGENT,
            **config.headers,
        }
        if access_token:
            headers["X-Access-Token"] = access_token
        self.headers = headers
        self.http = http_client(
            base_url=self.base_url, headers=headers, timeout=httpx.Timeout(config.request_timeout)
        )
        rpc_http = Client(_PlainErrorTransport(get_default_transport()))
        options: dict[str, Any] = {
            "codec": JsonCodec(),
            "http_client": rpc_http,
            "send_compression": None,
            "accept_compression": (),
        }
        self.process = process_connect.ProcessClient(self.base_url, **options)
        self.filesystem = filesystem_connect.FilesystemClient(self.base_url, **options)

    def rpc_headers(self, user: str | None = None, *, stream: bool = False) -> dict[str, str]:
        """Headers for one RPC: routing, token, optional user and keepalive."""
        headers = {**self.headers, **user_header(user)}
        if stream:
            headers[KEEPALIVE_HEADER] = str(KEEPALIVE_SECONDS)
        return headers

    def request_timeout_ms(self, override: float | None) -> int | None:
        return timeout_ms(self.config.timeout(override))

    async def is_healthy(self) -> bool:
        """Whether the sandbox answers ``/health``; False only if the gateway says it is gone."""
        try:
            response = await self.http.get("/health", timeout=HEALTH_TIMEOUT)
        except httpx.TimeoutException as exc:
            raise e.TimeoutError("the sandbox health check timed out") from exc
        except httpx.TransportError as exc:
            raise e.SandboxUnreachableError(f"cannot reach {self.base_url}: {exc}") from exc
        if response.is_success:
            return True
        if response.status_code == 502 and SANDBOX_GONE in response.text:
            return False
        raise http_error(
            response.status_code,
            response.headers.get("content-type", ""),
            response.content,
            "health check",
        )

    async def aclose(self) -> None:
        await self.http.aclose()


async def await_opening(
    started: asyncio.Future[Any], task: asyncio.Task[Any], request_timeout: float | None, what: str
) -> None:
    """Wait until the stream that ``task`` iterates delivers its opening message.

    The stream must be iterated by one task from its first message to its last:
    connectrpc arms the stream's deadline against the task that starts iterating, so
    opening it in the caller's task and reading it in another would cancel the caller
    when the deadline passes. On failure or timeout the task is stopped.
    """
    deadline = asyncio.timeout(request_timeout)
    try:
        async with deadline:
            await asyncio.shield(started)
    except BaseException as exc:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if started.done() and not started.cancelled():
            started.exception()  # reported through ``exc``; mark it retrieved
        if deadline.expired():
            raise e.TimeoutError(
                f"{what}: the stream did not open within {request_timeout} s (request_timeout)"
            ) from exc
        raise
