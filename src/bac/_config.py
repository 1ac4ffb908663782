"""Where the SDK connects and with which credentials.

Resolution order for every setting: the explicit argument, then Bac's environment
variable, then E2B's (so code and shells set up for the official SDK keep working),
then the default. Envd traffic goes to the same base URL as the API unless a sandbox
URL is given: the server's gateway routes it by the ``E2b-Sandbox-Id`` and
``E2b-Sandbox-Port`` headers.
"""

from __future__ import annotations

import functools
import math
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict
from urllib.parse import urlsplit

import httpx

from bac._errors import AuthenticationError, InvalidArgumentError

DEFAULT_API_URL = "http://localhost:3000"
DEFAULT_REQUEST_TIMEOUT = 60.0
ENVD_PORT = 49983


def seconds(value: object, name: str = "timeout") -> float | None:
    """A duration argument checked before anything is sent: a number of seconds >= 0, 0
    for no limit, None for the default. Anything else is the caller's mistake, said as
    such (not a timeout or a TypeError from deep inside)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(
            f"{name} must be a number of seconds (0: no limit), got {value!r}")
    if math.isnan(value) or value < 0:
        raise InvalidArgumentError(f"{name} must be >= 0 seconds (0: no limit), got {value!r}")
    return float(value)


def whole_seconds(value: object, name: str = "timeout", *, meaning: str = "") -> int:
    """A sandbox lifetime: as :func:`seconds`, required, and whole (the API counts whole
    seconds). ``meaning`` says what 0 means there, for the message."""
    checked = seconds(value, name)
    if checked is None or checked != int(checked):
        raise InvalidArgumentError(
            f"{name} must be a whole number of seconds{meaning}, got {value!r}")
    return int(checked)


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name)
        if value:
            return value
    return None


def _clean_url(url: str, setting: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgumentError(f"{setting} must be an http(s) URL, got {url!r}")
    return url.rstrip("/")


class ConnectionOpts(TypedDict, total=False):
    """Where and how to reach the Bac API; unset values come from the environment."""

    api_key: str | None
    api_url: str | None
    sandbox_url: str | None
    domain: str | None
    request_timeout: float | None
    headers: dict[str, str] | None


@dataclass(frozen=True)
class ConnectionConfig:
    """Resolved connection settings shared by every request a sandbox makes."""

    api_url: str = DEFAULT_API_URL
    api_key: str | None = None
    sandbox_url: str | None = None
    domain: str | None = None
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(
        cls,
        *,
        api_key: str | None = None,
        api_url: str | None = None,
        sandbox_url: str | None = None,
        domain: str | None = None,
        request_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ConnectionConfig:
        """Build a config from arguments, falling back to the environment."""
        env = os.environ if env is None else env
        url = api_url or _first(env, "BAC_API_URL", "E2B_API_URL") or DEFAULT_API_URL
        box_url = sandbox_url or _first(env, "BAC_SANDBOX_URL", "E2B_SANDBOX_URL")
        timeout = request_timeout
        if timeout is None:
            raw = _first(env, "BAC_REQUEST_TIMEOUT")
            try:
                timeout = float(raw) if raw else DEFAULT_REQUEST_TIMEOUT
            except ValueError as exc:
                raise InvalidArgumentError(
                    f"BAC_REQUEST_TIMEOUT must be a number of seconds, got {raw!r}"
                ) from exc
        if timeout < 0:
            raise InvalidArgumentError("request_timeout must be >= 0 (0 means no limit)")
        return cls(
            api_url=_clean_url(url, "api_url"),
            api_key=api_key or _first(env, "BAC_API_KEY", "E2B_API_KEY"),
            sandbox_url=_clean_url(box_url, "sandbox_url") if box_url else None,
            domain=domain or _first(env, "BAC_DOMAIN", "E2B_DOMAIN"),
            request_timeout=timeout or None,
            headers=dict(headers or {}),
        )

    def require_api_key(self) -> str:
        """The API key, or a clear error before any request is made."""
        if not self.api_key:
            raise AuthenticationError(
                "no API key: pass api_key=, or set BAC_API_KEY (or E2B_API_KEY); "
                "create one with `bac keys create`"
            )
        return self.api_key

    def envd_url(self) -> str:
        """Base URL of envd traffic: the sandbox URL, else the API's gateway."""
        return self.sandbox_url or self.api_url

    def host_domain(self, sandbox_domain: str | None = None) -> str:
        """Domain of per-port host names: the server's answer, config, else the API host."""
        return sandbox_domain or self.domain or urlsplit(self.api_url).netloc

    def timeout(self, override: float | None) -> float | None:
        """A per-call timeout in seconds; 0 disables it, None takes the default."""
        checked = seconds(override, "request_timeout")
        if checked is None:
            return self.request_timeout
        return None if checked == 0 or math.isinf(checked) else checked


@functools.cache
def _tls_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # reads SSL_CERT_FILE / SSL_CERT_DIR as httpx does


def http_client(**options: Any) -> httpx.AsyncClient:
    """An httpx client verifying TLS as httpx's default does, with one context per process
    (per CA settings): httpx makes a new one for each client, about 20 ms of CPU, and a
    sandbox's create made three."""
    context = _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    return httpx.AsyncClient(verify=context, **options)
