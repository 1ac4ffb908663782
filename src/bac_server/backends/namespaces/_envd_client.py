"""Talking to envd from the host: its readiness pipe and its ``/init`` call."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx

from bac_server.backends.base import ENVD_PORT


class EnvdUnavailable(Exception):
    """envd did not become ready or refused /init."""


async def wait_ready(read_fd: int, limit_s: float) -> None:
    """Wait for ``ready\\n`` on the pipe envd inherited as fd 3. EOF means envd died."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future[bytes] = loop.create_future()
    os.set_blocking(read_fd, False)
    buffer = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(read_fd, 64)
        except BlockingIOError:
            return
        buffer.extend(chunk)
        if (not chunk or b"\n" in buffer) and not got.done():
            got.set_result(bytes(buffer))

    loop.add_reader(read_fd, readable)
    try:
        data = await asyncio.wait_for(got, limit_s)
    except TimeoutError as exc:
        raise EnvdUnavailable(f"envd did not report ready within {limit_s:.0f}s") from exc
    finally:
        loop.remove_reader(read_fd)
    if not data.startswith(b"ready"):
        raise EnvdUnavailable("envd exited before it was ready")


def init_payload(env_vars: dict[str, str], access_token: str | None, user: str,
                 workdir: str) -> dict[str, Any]:
    payload: dict[str, Any] = {"envVars": dict(env_vars), "defaultUser": user,
                               "defaultWorkdir": workdir}
    if access_token is not None:
        payload["accessToken"] = access_token
    return payload


async def post_init(client: httpx.AsyncClient, address: str, payload: dict[str, Any],
                    limit_s: float) -> None:
    url = f"http://{address}:{ENVD_PORT}/init"
    try:
        response = await client.post(url, json=payload, timeout=limit_s)
    except httpx.HTTPError as exc:
        raise EnvdUnavailable(f"envd /init failed: {exc!r}") from exc
    if response.status_code not in (200, 204):
        raise EnvdUnavailable(f"envd /init answered {response.status_code}: "
                              f"{response.text[:300]}")
