"""Signature v1 of envd's ``/files`` URLs, the scheme of E2B's SDKs and envd.

``v1_`` + unpadded standard base64 of SHA-256 over
``"<path>:<operation>:<username>:<token>"``, with ``":<expiration>"`` (Unix seconds)
appended when the URL expires. ``path`` is the ``path`` query value as sent (not
resolved), ``username`` is empty for the sandbox's default user, and ``token`` is the
sandbox's envd access token. Anyone holding a signed URL can read (``GET``) or write
(``POST``) that one path as that user without the token, until it expires.

One implementation for the three places that compute it: the SDK signs URLs, envd checks
them, and the server's gateway finds the sandbox whose token signed a URL that names no
sandbox.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Literal

Operation = Literal["read", "write"]
PREFIX = "v1_"


def sign(path: str, operation: Operation, username: str, token: str,
         expiration: int | None = None) -> str:
    """The signature of ``operation`` on ``path`` as ``username`` ("" for the default user)."""
    raw = f"{path}:{operation}:{username}:{token}"
    if expiration is not None:
        raw += f":{expiration}"
    digest = hashlib.sha256(raw.encode()).digest()
    return PREFIX + base64.b64encode(digest).rstrip(b"=").decode("ascii")


def matches(given: str, path: str, operation: Operation, username: str, token: str,
            expiration: int | None) -> bool:
    """Whether ``given`` is that signature, compared in constant time."""
    expected = sign(path, operation, username, token, expiration)
    return hmac.compare_digest(expected.encode(), given.encode())


def parse_expiration(raw: str | None) -> int | None:
    """The ``signature_expiration`` query value (None when absent); ValueError unless it
    is an integer. The signature covers the number, not the text it was written as."""
    return None if raw is None else int(raw)
