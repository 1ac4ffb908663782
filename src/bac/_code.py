"""The code interpreter of a ``code-interpreter`` sandbox: run cells, manage contexts.

It backs ``run_code`` and the code-context methods of ``AsyncSandbox``/``Sandbox``; they
work on sandboxes made from the ``code-interpreter`` template (alias
``code-interpreter-v1``), whose kernel server listens on port 49999; on any other sandbox
they raise :class:`~bac.SandboxUnreachableError` saying nothing listens there.

Requests go to the kernel server on port 49999 through the server's gateway, routed by
``E2b-Sandbox-Id`` and ``E2b-Sandbox-Port`` like envd traffic, with the sandbox's
traffic token when it has one. ``/execute`` also carries the envd access token: the
kernel server forwards it to envd to read the sandbox-wide env vars. The execution's
NDJSON lines are parsed as they arrive, so callbacks fire while the cell still runs.
Every failure becomes an SDK error (see :mod:`bac._errors`); the kernel server's
plain-text 400/404 answers keep their text.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from bac import _errors as e
from bac._code_results import (
    Context,
    Event,
    Execution,
    ExecutionError,
    ExecutionParser,
    OutputMessage,
    Result,
)
from bac._config import ConnectionConfig, http_client, seconds
from bac._envd import PORT_CLOSED, SANDBOX_GONE
from bac._version import USER_AGENT

CODE_PORT = 49999
DEFAULT_RUN_TIMEOUT = 300.0
TRAFFIC_HEADER = "E2B-Traffic-Access-Token"

T = TypeVar("T")
Callback = Callable[[T], Awaitable[None] | None]
HealthProbe = Callable[[], Awaitable[bool]]

_STATUS_ERRORS: dict[int, type[e.SandboxError]] = {
    400: e.InvalidArgumentError,
    401: e.AuthenticationError,
    403: e.PermissionDeniedError,
    404: e.NotFoundError,
    413: e.InvalidArgumentError,
    422: e.InvalidArgumentError,
    429: e.RateLimitError,
    504: e.TimeoutError,
}


def status_error(status: int, body: bytes, what: str) -> e.SandboxError:
    """The SDK error for a non-2xx answer from the kernel server or the gateway."""
    message = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
        message = parsed["message"]
    message = message[:500] or f"HTTP {status}"
    if status == 502 and SANDBOX_GONE in message:
        return e.SandboxNotRunningError(
            f"{what}: the sandbox was killed or reached its timeout ({message})",
            status_code=status,
        )
    if status == 502 and PORT_CLOSED in message:
        return e.SandboxUnreachableError(
            f"{what}: nothing listens on port {CODE_PORT} in the sandbox; was it created "
            "from the code-interpreter template?", status_code=status,
        )
    cls = _STATUS_ERRORS.get(status, e.ServerError)
    if cls is e.PermissionDeniedError:
        return e.permission_denied(f"{what}: {message}", status_code=status)
    return cls(f"{what}: {message}", status_code=status)


async def _call(callback: Callback[T] | None, value: T) -> None:
    if callback is None:
        return
    outcome = callback(value)
    if inspect.isawaitable(outcome):
        await outcome


class CodeClient:
    """HTTP client of one sandbox's kernel server."""

    def __init__(
        self,
        config: ConnectionConfig,
        sandbox_id: str,
        access_token: str | None,
        traffic_token: str | None,
        probe: HealthProbe,
    ) -> None:
        self._config = config
        self._access_token = access_token
        self._probe = probe
        headers = {
            "E2b-Sandbox-Id": sandbox_id,
            "E2b-Sandbox-Port": str(CODE_PORT),
            "User-Agent": USER_AGENT,
            **config.headers,
        }
        if traffic_token:
            headers[TRAFFIC_HEADER] = traffic_token
        self._http = http_client(base_url=config.envd_url(), headers=headers)

    def _timeout(self, request_timeout: float | None, read: bool = True) -> httpx.Timeout:
        limit = self._config.timeout(request_timeout)
        return httpx.Timeout(limit, read=limit if read else None)

    async def _lost(self, exc: Exception, what: str) -> e.SandboxError:
        """The error for a connection that broke mid-request: gone, or just unreachable."""
        try:
            running = await self._probe()
        except e.SandboxError as probe_error:
            return e.SandboxUnreachableError(
                f"{what}: connection lost ({exc!r}) and the health check failed ({probe_error})"
            )
        if not running:
            return e.SandboxNotRunningError(
                f"{what}: the sandbox was killed or reached its timeout while the request "
                "was in flight"
            )
        return e.SandboxUnreachableError(f"{what}: connection to the sandbox lost ({exc!r})")

    async def run(
        self,
        code: str,
        language: str | None,
        context: Context | str | None,
        envs: dict[str, str] | None,
        timeout: float | None,  # noqa: ASYNC109 - the execution's own deadline, E2B API
        request_timeout: float | None,
        on_stdout: Callback[OutputMessage] | None,
        on_stderr: Callback[OutputMessage] | None,
        on_result: Callback[Result] | None,
        on_error: Callback[ExecutionError] | None,
    ) -> Execution:
        """POST ``code`` to /execute and fold its NDJSON stream, reporting each line as it
        arrives; see :meth:`bac.AsyncSandbox.run_code`."""
        if language is not None and context is not None:
            raise e.InvalidArgumentError("give either language or context, not both")
        timeout = seconds(timeout)
        body: dict[str, Any] = {
            "code": code,
            "context_id": context.id if isinstance(context, Context) else context,
            "language": language,
            "env_vars": envs,
        }
        headers = {"X-Access-Token": self._access_token} if self._access_token else {}
        parser = ExecutionParser()
        deadline = asyncio.timeout(timeout or None)
        try:
            async with deadline, self._http.stream(
                "POST", "/execute", json=body, headers=headers,
                timeout=self._timeout(request_timeout, read=False),
            ) as response:
                if not response.is_success:
                    raise status_error(response.status_code, await response.aread(), "run_code")
                async for line in response.aiter_lines():
                    await self._report(parser.feed(line), on_stdout, on_stderr, on_result,
                                       on_error)
        except TimeoutError as exc:
            if deadline.expired():
                raise e.TimeoutError(
                    f"run_code: the execution did not finish within {timeout} s (timeout=); "
                    "the kernel was interrupted and keeps its state"
                ) from exc
            raise
        except httpx.TimeoutException as exc:
            raise e.TimeoutError("run_code: the kernel server did not answer in time") from exc
        except httpx.ConnectError as exc:
            raise e.ServerUnreachableError(f"run_code: cannot reach {self._http.base_url}") from exc
        except httpx.TransportError as exc:
            raise await self._lost(exc, "run_code") from exc
        if not parser.ended:
            raise await self._lost(EOFError("stream ended early"), "run_code")
        return parser.execution

    async def create_context(
        self, cwd: str | None, language: str | None, request_timeout: float | None
    ) -> Context:
        body = {key: value for key, value in (("language", language), ("cwd", cwd)) if value}
        answer = await self._request(
            "POST", "/contexts", "create_code_context", request_timeout, body
        )
        return Context.from_json(answer)

    async def list_contexts(self, request_timeout: float | None) -> list[Context]:
        answer = await self._request("GET", "/contexts", "list_code_contexts", request_timeout)
        if not isinstance(answer, list):
            raise e.ServerError(f"list_code_contexts: expected a list, got {answer!r:.200}")
        return [Context.from_json(item) for item in answer]

    async def restart_context(self, context: Context | str,
                              request_timeout: float | None) -> None:
        await self._request("POST", _context_path(context, "/restart"),
                            "restart_code_context", request_timeout)

    async def remove_context(self, context: Context | str,
                             request_timeout: float | None) -> None:
        await self._request("DELETE", _context_path(context), "remove_code_context",
                            request_timeout)

    async def _request(
        self, method: str, path: str, what: str, request_timeout: float | None,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """One JSON request; its decoded answer (None for an empty body)."""
        try:
            response = await self._http.request(
                method, path, json=body, timeout=self._timeout(request_timeout)
            )
        except httpx.TimeoutException as exc:
            raise e.TimeoutError(f"{what}: no answer within the request timeout") from exc
        except httpx.ConnectError as exc:
            raise e.ServerUnreachableError(f"{what}: cannot reach {self._http.base_url}") from exc
        except httpx.TransportError as exc:
            raise await self._lost(exc, what) from exc
        if not response.is_success:
            raise status_error(response.status_code, response.content, what)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise e.ServerError(f"{what}: the kernel server's answer is not JSON") from exc

    @staticmethod
    async def _report(
        event: Event,
        on_stdout: Callback[OutputMessage] | None,
        on_stderr: Callback[OutputMessage] | None,
        on_result: Callback[Result] | None,
        on_error: Callback[ExecutionError] | None,
    ) -> None:
        if isinstance(event, OutputMessage):
            await _call(on_stderr if event.error else on_stdout, event)
        elif isinstance(event, Result):
            await _call(on_result, event)
        elif isinstance(event, ExecutionError):
            await _call(on_error, event)

    async def aclose(self) -> None:
        await self._http.aclose()


def _context_path(context: Context | str, suffix: str = "") -> str:
    """The URL path of a context, from the context or its id."""
    context_id = context.id if isinstance(context, Context) else context
    if not context_id:
        raise e.InvalidArgumentError("a context id must not be empty")
    return f"/contexts/{quote(context_id, safe='')}{suffix}"
