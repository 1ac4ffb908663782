"""``GET /files`` (download) and ``POST /files`` (upload), streamed in both directions.

Neither direction holds a file in memory: downloads are read and (optionally) gzipped in
1 MiB pieces, uploads are parsed incrementally (multipart or raw, optionally gunzipped)
and written as the body arrives.
"""

from __future__ import annotations

import time

from bac_envd import _trace
from bac_envd._errors import UnknownUser
from bac_envd._http import Message, Receive, Scope, Send, header, query, send_error
from bac_envd._paths import resolver
from bac_envd._state import EnvdState
from bac_envd._users import default_username, lookup_user
from bac_envd.transfer._signing import signature_error
from bac_protocol.signing import Operation


async def handle_files(scope: Scope, receive: Receive, send: Send, state: EnvdState) -> None:
    try:
        params = query(scope)
    except UnicodeDecodeError:
        await send_error(send, 400, "query string is not valid UTF-8")
        return
    operation: Operation = "read" if scope["method"] == "GET" else "write"
    problem = signature_error(state, header(scope, "x-access-token"), params, operation)
    if problem is not None:
        await send_error(send, 401, problem)
        return
    username = params.get("username") or default_username(state.default_user)
    try:
        user = lookup_user(username)
    except UnknownUser as exc:
        await send_error(send, 401, f"error looking up user '{username}': {exc}")
        return
    resolve = resolver(user, state.default_workdir)
    began, status = time.monotonic(), [0]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]
        await send(message)

    files: list[tuple[str, int]] = []
    try:
        if operation == "read":
            from bac_envd.transfer._download import download

            files = await download(scope, sending, resolve, params.get("path", ""))
        else:
            from bac_envd.transfer._upload import upload

            files = await upload(scope, receive, sending, user, resolve, params.get("path"))
    finally:
        _trace.report("transfer", {
            "direction": "download" if operation == "read" else "upload",
            "path": _trace.clip(files[0][0] if len(files) == 1 else params.get("path") or ""),
            "paths": [_trace.clip(p, 256) for p, _ in files[:16]],
            "bytes": sum(size for _, size in files), "user": user.name,
            "duration_ms": round((time.monotonic() - began) * 1000, 3),
            "status": status[0], "ok": 200 <= status[0] < 300,
        })


__all__ = ["handle_files"]
