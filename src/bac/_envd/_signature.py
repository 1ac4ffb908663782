"""Signed file URLs: signature v1 (:mod:`bac_protocol.signing`, what envd checks) and the
``/files`` URL that carries it.

Anyone holding such a URL can read or write that one path as that user without the
access token, until it expires.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from bac_protocol import signing
from bac_protocol.signing import Operation


@dataclass(frozen=True)
class Signature:
    """A signature and the Unix time it stops being accepted (None: never)."""

    signature: str
    expiration: int | None


def sign(
    path: str,
    operation: Operation,
    user: str | None,
    access_token: str,
    expires_in: int | None = None,
    *,
    now: float | None = None,
) -> Signature:
    """Sign ``operation`` on ``path`` as ``user`` (None: the sandbox's default user)."""
    if not access_token:
        raise ValueError("the sandbox has no access token, so URLs cannot be signed")
    expiration = None
    if expires_in is not None:
        expiration = int(time.time() if now is None else now) + expires_in
    return Signature(signing.sign(path, operation, user or "", access_token, expiration),
                     expiration)


def file_url(
    base_url: str,
    path: str,
    user: str | None = None,
    signature: Signature | None = None,
) -> str:
    """The ``/files`` URL for ``path``, with the query parameters envd expects."""
    query: dict[str, str] = {"path": path} if path else {}
    if user:
        query["username"] = user
    if signature is not None:
        query["signature"] = signature.signature
        if signature.expiration is not None:
            query["signature_expiration"] = str(signature.expiration)
    return f"{base_url.rstrip('/')}/files?{urlencode(query, quote_via=quote)}"
