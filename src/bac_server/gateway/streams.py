"""The gateway's side of stream tokens (:mod:`bac_server.control.streams`).

A request for a stream port passes only with a valid token for that sandbox and port,
taken from the path's first segments ``/bac_stream/<token>/``, else the ``bac_stream``
query parameter, else the ``bac_stream`` cookie. The token stands in for E2B's traffic
token there (a browser cannot send that header). It never reaches the sandbox: the path
prefix, the parameter and the cookie are taken out of the relayed request. A page opened
with the parameter gets the cookie (host-only, ``HttpOnly``, ``SameSite=Strict``,
``Secure`` under TLS, ending with the token), so the page's own scripts, images and
WebSocket pass too. A page opened under the path prefix needs no cookie: its relative
URLs keep the prefix, so it works framed in another site's page (Mission Control's
Desktop tab), where a ``SameSite=Strict`` cookie is never sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.types import Message, Scope, Send

from bac_server.control.streams import (
    COOKIE,
    PATH_PREFIX,
    QUERY_PARAMETER,
    StreamCheck,
    StreamTokens,
)

_PARAMETER = QUERY_PARAMETER.encode() + b"="
_COOKIE = COOKIE.encode() + b"="
REFUSALS = {
    StreamCheck.MISSING: "this port is a desktop stream: open it with a stream token "
                         "(POST /sandboxes/{id}/streams, bac desktop open)",
    StreamCheck.INVALID: "the stream token is not valid for this sandbox and port",
    StreamCheck.EXPIRED: "the stream token has expired: ask for a new one",
}


@dataclass(frozen=True)
class StreamPass:
    """What a checked request becomes: its scope without the token, and the cookie to set
    (None when the token came from the cookie, or for a WebSocket)."""

    scope: Scope
    set_cookie: bytes | None


def _from_query(query: bytes) -> tuple[str | None, bytes]:
    token: str | None = None
    kept = []
    for part in query.split(b"&"):
        if part.startswith(_PARAMETER):
            token = token or part[len(_PARAMETER):].decode("latin-1")
        elif part:
            kept.append(part)
    return token, b"&".join(kept)


Headers = list[tuple[bytes, bytes]]


def _from_cookies(headers: Headers) -> tuple[str | None, Headers]:
    token: str | None = None
    kept_headers = []
    for name, value in headers:
        if name != b"cookie":
            kept_headers.append((name, value))
            continue
        others = []
        for crumb in (c.strip() for c in value.split(b";")):
            if crumb.startswith(_COOKIE):
                token = token or crumb[len(_COOKIE):].decode("latin-1")
            elif crumb:
                others.append(crumb)
        if others:
            kept_headers.append((name, b"; ".join(others)))
    return token, kept_headers


def _from_path(scope: Scope) -> tuple[str | None, dict[str, object]]:
    """The token in a ``/bac_stream/<token>/rest`` path, and the scope's path fields
    without it (unchanged without one)."""
    path: str = scope.get("path", "")
    if not path.startswith(PATH_PREFIX):
        return None, {}
    token, slash, rest = path[len(PATH_PREFIX):].partition("/")
    relayed = "/" + rest if slash else "/"
    return token, {"path": relayed, "raw_path": relayed.encode("latin-1")}


def check_stream(tokens: StreamTokens, scope: Scope, sandbox_id: str, secret: str,
                 port: int) -> StreamPass | StreamCheck:
    """The request's pass, or why it is refused."""
    in_path, path_fields = _from_path(scope)
    in_query, query = _from_query(scope.get("query_string", b""))
    in_cookie, headers = _from_cookies(list(scope["headers"]))
    token = in_path if in_path is not None else in_query if in_query is not None \
        else in_cookie
    verdict = tokens.check(token, sandbox_id, secret, port)
    if verdict is not StreamCheck.VALID:
        return verdict
    assert token is not None
    relayed = dict(scope, query_string=query, headers=headers, **path_fields)
    cookie = None
    if in_path is None and in_query is not None and scope["type"] == "http":
        expiry = int(token.partition(".")[0])
        secure = "; Secure" if scope.get("scheme") in ("https", "wss") else ""
        cookie = (f"{COOKIE}={token}; Path=/; Max-Age={tokens.seconds_left(expiry)}; "
                  f"HttpOnly; SameSite=Strict{secure}").encode("latin-1")
    return StreamPass(relayed, cookie)


def with_cookie(send: Send, cookie: bytes) -> Send:
    """``send`` adding ``Set-Cookie`` to the response's head."""
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = dict(message, headers=[*message.get("headers", []),
                                             (b"set-cookie", cookie)])
        await send(message)
    return sending
