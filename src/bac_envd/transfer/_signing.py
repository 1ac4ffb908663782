"""Signature v1 for ``/files`` URLs (E2B envd's scheme, compatible with the SDK's signer).

``v1_`` + base64-no-pad(sha256("<path>:<operation>:<username>:<token>[:<expiration>]")),
checked in constant time; the expiration is checked only after the signature matched, so
a genuine but stale URL gets "signature is already expired".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

from bac_envd._state import EnvdState


def sign(path: str, operation: str, username: str, token: str, expiration: int | None) -> str:
    parts = [path, operation, username, token]
    if expiration is not None:
        parts.append(str(expiration))
    digest = hashlib.sha256(":".join(parts).encode()).digest()
    return "v1_" + base64.b64encode(digest).decode().rstrip("=")


def signature_error(
    state: EnvdState, header_token: str | None, params: dict[str, str], operation: str
) -> str | None:
    """The 401 message for this request, or None when it is authorised."""
    token = state.access_token
    if token is None:
        return None
    if header_token:
        if hmac.compare_digest(header_token.encode(), token.encode()):
            return None
        return "access token present in header but does not match"
    signature = params.get("signature")
    if signature is None:
        return "missing signature query parameter"
    raw_expiration = params.get("signature_expiration")
    expiration: int | None = None
    if raw_expiration is not None:
        try:
            expiration = int(raw_expiration)
        except ValueError:
            return "invalid signature"
    path, username = params.get("path", ""), params.get("username", "")
    expected = sign(path, operation, username, token, expiration)
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        return "invalid signature"
    if expiration is not None and expiration < time.time():
        return "signature is already expired"
    return None
