"""Signed file URLs (signature v1), identical to what envd verifies.

``v1_`` + unpadded standard base64 of SHA-256 over
``"<path>:<operation>:<user>:<token>"`` with ``":<expiration>"`` appended when the URL
expires. Anyone holding such a URL can read or write that one path as that user
without the access token, until it expires.
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, urlencode

Operation = Literal["read", "write"]


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
    raw = f"{path}:{operation}:{user or ''}:{access_token}"
    if expiration is not None:
        raw += f":{expiration}"
    digest = hashlib.sha256(raw.encode()).digest()
    encoded = base64.b64encode(digest).rstrip(b"=").decode("ascii")
    return Signature(f"v1_{encoded}", expiration)


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
