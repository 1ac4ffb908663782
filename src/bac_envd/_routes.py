"""Plain HTTP routes other than ``/files``: ``/health``, ``/init``, ``/envs``, ``/metrics``."""

from __future__ import annotations

import json

from bac_envd import ENVD_VERSION
from bac_envd._errors import InitError
from bac_envd._http import (
    BodyTooLarge,
    ClientGone,
    Receive,
    Scope,
    Send,
    read_body,
    send_empty,
    send_error,
    send_json,
)
from bac_envd._memory import merge_pages
from bac_envd._state import EnvdState

_INIT_BODY_LIMIT = 1 << 20


async def health(scope: Scope, receive: Receive, send: Send, state: EnvdState) -> None:
    await send_empty(send, 204)


async def init(scope: Scope, receive: Receive, send: Send, state: EnvdState) -> None:
    try:
        raw = await read_body(receive, _INIT_BODY_LIMIT)
    except BodyTooLarge:
        await send_error(send, 413, "init body too large")
        return
    except ClientGone:
        return
    try:
        body = json.loads(raw) if raw.strip() else None
        state.apply_init(body)
        merge_pages()  # again after a restore: the process-wide mark is not restored
    except (ValueError, InitError) as exc:
        await send_error(send, 400, f"invalid init body: {exc}")
        return
    await send_empty(
        send,
        204,
        [(b"x-envd-version", ENVD_VERSION.encode()), (b"cache-control", b"no-store")],
    )


async def envs(scope: Scope, receive: Receive, send: Send, state: EnvdState) -> None:
    await send_json(send, 200, state.env_vars)


async def metrics(scope: Scope, receive: Receive, send: Send, state: EnvdState) -> None:
    from bac_envd._metrics import sample

    await send_json(send, 200, sample())
