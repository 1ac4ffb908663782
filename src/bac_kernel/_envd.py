"""The sandbox-wide env vars, as envd (port 49983) knows them.

They are set when the sandbox is created, after the kernel server may already be running
(a template can be checkpointed with it started), so each context asks envd on its first
execution, with the caller's access token. No envd (a bare host, an older sandbox) means
no extra env vars, never a failed execution.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request

DEFAULT_ENVD_URL = "http://127.0.0.1:49983"
_TIMEOUT = 2.0

_log = logging.getLogger(__name__)


class EnvdClient:
    """Reads `GET /envs` from envd; an unreachable envd yields an empty mapping."""

    def __init__(self, base_url: str | None = DEFAULT_ENVD_URL) -> None:
        self._base_url = base_url.rstrip("/") if base_url else None

    async def sandbox_envs(self, access_token: str | None) -> dict[str, str]:
        if self._base_url is None:
            return {}
        return await asyncio.to_thread(self._fetch, access_token)

    def _fetch(self, access_token: str | None) -> dict[str, str]:
        request = urllib.request.Request(f"{self._base_url}/envs")  # noqa: S310 (fixed scheme)
        if access_token:
            request.add_header("X-Access-Token", access_token)
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:  # noqa: S310
                body = json.loads(response.read() or b"{}")
        except (OSError, ValueError, urllib.error.URLError) as exc:
            _log.info("no sandbox env vars from envd (%s); continuing without", exc)
            return {}
        if not isinstance(body, dict):
            return {}
        return {str(k): str(v) for k, v in body.items() if isinstance(v, str)}
