"""Routing signed file URLs, which carry no routing header and no sandbox host name.

``Sandbox.upload_url()`` / ``download_url()`` build ``<sandbox url>/files?path=..&signature=..``
for a third party to use. With ``E2B_SANDBOX_URL`` pointing every sandbox at this server, such
a URL names no sandbox; but its signature is a hash over the sandbox's envd token, so exactly
one running sandbox can have produced it. We find that one by recomputing the signature with
each candidate's token (one sha256 per running sandbox). envd checks the signature again;
this only decides where the request goes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable
from urllib.parse import parse_qs

from starlette.types import Scope

from bac_server.control import Route

_OPERATIONS = {"GET": "read", "HEAD": "read", "POST": "write"}


def _signature(path: str, operation: str, user: str, token: str, expiration: str | None) -> str:
    raw = f"{path}:{operation}:{user}:{token}"
    if expiration is not None:
        raw += f":{expiration}"
    digest = hashlib.sha256(raw.encode()).digest()
    return "v1_" + base64.b64encode(digest).rstrip(b"=").decode()


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
    if not given.startswith("v1_"):
        return None
    path = params.get("path", [""])[0]
    user = params.get("username", [""])[0]
    expiration = params.get("signature_expiration", [None])[0]
    for route in routes:
        if not route.envd_access_token:
            continue
        expected = _signature(path, operation, user, route.envd_access_token, expiration)
        if hmac.compare_digest(expected.encode(), given.encode()):
            return route
    return None
