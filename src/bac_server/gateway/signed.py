"""Routing signed file URLs, which carry no routing header and no sandbox host name.

``Sandbox.upload_url()`` / ``download_url()`` build ``<sandbox url>/files?path=..&signature=..``
for a third party to use. With ``E2B_SANDBOX_URL`` pointing every sandbox at this server, such
a URL names no sandbox; but its signature is a hash over the sandbox's envd token, so exactly
one running sandbox can have produced it. We find that one by recomputing the signature
(:mod:`bac_protocol.signing`, the one envd checks) with each candidate's token (one sha256
per running sandbox). envd checks the signature again; this only decides where the request
goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qs

from starlette.types import Scope

from bac_protocol.signing import PREFIX, Operation, matches, parse_expiration
from bac_server.control import Route

_OPERATIONS: dict[str, Operation] = {"GET": "read", "HEAD": "read", "POST": "write"}


def is_signed_files_request(scope: Scope) -> bool:
    return (
        scope["type"] == "http"
        and scope["path"] == "/files"
        and b"signature=" in scope.get("query_string", b"")
    )


def signer_of(scope: Scope, routes: Iterable[Route]) -> Route | None:
    """The running sandbox whose envd token produced this request's signature, if any."""
    operation = _OPERATIONS.get(scope["method"])
    if operation is None:
        return None
    params = parse_qs(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    given = params.get("signature", [""])[0]
    if not given.startswith(PREFIX):
        return None
    path = params.get("path", [""])[0]
    user = params.get("username", [""])[0]
    try:
        expiration = parse_expiration(params.get("signature_expiration", [None])[0])
    except ValueError:
        return None  # envd refuses it too: "invalid signature"
    for route in routes:
        if route.envd_access_token and matches(given, path, operation, user,
                                               route.envd_access_token, expiration):
            return route
    return None
