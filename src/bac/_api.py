"""The control-plane REST client: sandboxes created, found, listed, extended, killed.

This is the boundary where HTTP answers become SDK errors (:func:`api_error`); callers
above it see only :mod:`bac._errors` classes and parsed bodies. Retries follow the
server's ``Should-Retry`` header, falling back to retrying 429/502/503/504.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from bac import _errors as e
from bac._config import ConnectionConfig, http_client
from bac._version import USER_AGENT

_RETRY_STATUSES = frozenset({429, 502, 503, 504})
_STATUS_ERRORS: dict[int, type[e.SandboxError]] = {
    400: e.InvalidArgumentError,
    401: e.AuthenticationError,
    403: e.PermissionDeniedError,
    404: e.NotFoundError,
    409: e.AlreadyExistsError,
    413: e.InvalidArgumentError,
    422: e.InvalidArgumentError,
    429: e.RateLimitError,
    507: e.NotEnoughSpaceError,
}
MAX_RETRIES = 3


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    text = response.text.strip()
    return text[:200] if text else response.reason_phrase


def api_error(
    response: httpx.Response, not_found: type[e.SandboxError] = e.NotFoundError
) -> e.SandboxError:
    """The SDK error for a failed API response; ``not_found`` names what a 404 means."""
    status = response.status_code
    cls = not_found if status == 404 else _STATUS_ERRORS.get(status, e.ServerError)
    if status == 504:
        cls = e.TimeoutError
    message = f"{status}: {_message(response)}"
    if cls is e.PermissionDeniedError:
        return e.permission_denied(message, status_code=status)
    return cls(message, status_code=status)


def _should_retry(response: httpx.Response) -> bool:
    flag = response.headers.get("should-retry")
    if flag is not None:
        return str(flag).strip().lower() == "true"
    return response.status_code in _RETRY_STATUSES


def _backoff(response: httpx.Response, attempt: int) -> float:
    after = response.headers.get("retry-after", "")
    if after.isdigit():
        return min(float(after), 30.0)
    base: float = min(0.1 * 2**attempt, 10.0)
    return base / 2 + random.uniform(0, base / 2)  # noqa: S311 - jitter, not crypto


class ApiClient:
    """One HTTP connection pool to the Bac API, authenticated with the team's key."""

    def __init__(self, config: ConnectionConfig) -> None:
        self.config = config
        headers = {"X-API-KEY": config.require_api_key(), "User-Agent": USER_AGENT}
        headers.update(config.headers)
        self._http = http_client(
            base_url=config.api_url,
            headers=headers,
            timeout=httpx.Timeout(config.request_timeout),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
        not_found: type[e.SandboxError] = e.NotFoundError,
        request_timeout: float | None = None,
    ) -> httpx.Response:
        """Send one API request, retrying what the server allows; raise on failure."""
        timeout = self.config.timeout(request_timeout)
        for attempt in range(MAX_RETRIES + 1):
            try:
                response = await self._http.request(
                    method, path, json=json, params=params, timeout=timeout
                )
            except httpx.TimeoutException as exc:
                raise e.TimeoutError(
                    f"{method} {path} timed out after {timeout} s (request_timeout)"
                ) from exc
            except httpx.TransportError as exc:
                raise e.ServerUnreachableError(
                    f"cannot reach the Bac API at {self.config.api_url}: {exc}"
                ) from exc
            if response.status_code in ok:
                return response
            if attempt < MAX_RETRIES and _should_retry(response):
                await asyncio.sleep(_backoff(response, attempt))
                continue
            raise api_error(response, not_found)
        raise AssertionError("unreachable")  # pragma: no cover

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """Like :meth:`request`, returning the parsed JSON body."""
        response = await self.request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise e.ServerError(f"{method} {path}: the server sent a non-JSON body") from exc

    @contextlib.asynccontextmanager
    async def stream(self, method: str, path: str, *,
                     not_found: type[e.SandboxError] = e.NotFoundError,
                     ) -> AsyncIterator[httpx.Response]:
        """One request whose 200 answer's body is read as it comes (no retries: a body
        may be large); a failure raises as :meth:`request` does."""
        try:
            async with self._http.stream(method, path,
                                         timeout=self.config.timeout(None)) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise api_error(response, not_found)
                yield response
        except httpx.TimeoutException as exc:
            raise e.TimeoutError(f"{method} {path} timed out (request_timeout)") from exc
        except httpx.TransportError as exc:
            raise e.ServerUnreachableError(
                f"cannot reach the Bac API at {self.config.api_url}: {exc}") from exc
