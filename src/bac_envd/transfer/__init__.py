"""``GET /files`` (download) and ``POST /files`` (upload), streamed in both directions.

Neither direction holds a file in memory: downloads are read and (optionally) gzipped in
1 MiB pieces, uploads are parsed incrementally (multipart or raw, optionally gunzipped)
and written as the body arrives.
"""

from __future__ import annotations

from bac_envd._errors import UnknownUser
from bac_envd._http import Receive, Scope, Send, header, query, send_error
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
    if operation == "read":
        from bac_envd.transfer._download import download

        await download(scope, send, resolve, params.get("path", ""))
    else:
        from bac_envd.transfer._upload import upload

        await upload(scope, receive, send, user, resolve, params.get("path"))


__all__ = ["handle_files"]
