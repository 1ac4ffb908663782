"""Talking to a sandbox's envd from the host over HTTP: ``/health`` and ``/init``.

These calls are on every create's path (a boot, a restore, a hand-out), so they use a bare
asyncio connection with h11 (the HTTP/1.1 state machine uvicorn and httpx are built on)
rather than a full client: one request per connection, no pools, no TLS context, no
per-request library detection.

Errors::

    EnvdUnavailable     envd did not answer, or refused the call (the message says which)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11

from bac_server.backends.base import ENVD_PORT

_MAX_BODY = 4096


class EnvdUnavailable(Exception):
    """envd did not become ready or refused /init."""


async def _exchange(address: str, port: int, method: bytes, target: bytes, body: bytes,
                    token: str | None = None) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(address, port)
    try:
        conn = h11.Connection(h11.CLIENT)
        headers = [("Host", f"{address}:{port}"), ("Content-Length", str(len(body))),
                   ("Connection", "close")]
        if body:
            headers.append(("Content-Type", "application/json"))
        if token:
            headers.append(("X-Access-Token", token))
        writer.write(conn.send(h11.Request(method=method, target=target, headers=headers))
                     or b"")
        if body:
            writer.write(conn.send(h11.Data(data=body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()
        status, received = 0, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                received = (received + bytes(event.data))[:_MAX_BODY]
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                return status, received
    finally:
        writer.close()


async def _call(address: str, port: int, method: bytes, target: bytes, body: bytes,
                limit_s: float, token: str | None = None) -> tuple[int, bytes]:
    try:
        async with asyncio.timeout(limit_s):
            return await _exchange(address, port, method, target, body, token)
    except (OSError, TimeoutError, h11.ProtocolError) as exc:
        raise EnvdUnavailable(f"envd {target.decode()} failed: {exc!r}") from exc


def init_payload(env_vars: dict[str, str], access_token: str | None, user: str,
                 workdir: str) -> dict[str, Any]:
    payload: dict[str, Any] = {"envVars": dict(env_vars), "defaultUser": user,
                               "defaultWorkdir": workdir}
    if access_token is not None:
        payload["accessToken"] = access_token
    return payload


async def probe_health(address: str, limit_s: float, *, port: int = ENVD_PORT) -> None:
    status, _ = await _call(address, port, b"GET", b"/health", b"", limit_s)
    if not 200 <= status < 300:
        raise EnvdUnavailable(f"envd /health answered {status}")


async def post_init(address: str, payload: dict[str, Any], limit_s: float,
                    current_token: str | None = None, *, port: int = ENVD_PORT) -> None:
    """``current_token``: the token envd already has (re-initialising needs it)."""
    status, text = await _call(address, port, b"POST", b"/init",
                               json.dumps(payload).encode(), limit_s, current_token)
    if status not in (200, 204):
        raise EnvdUnavailable(f"envd /init answered {status}: {text[:300]!r}")
