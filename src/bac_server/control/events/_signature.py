"""The signature of a webhook delivery: header ``e2b-signature``, the unpadded base64 of
SHA-256 over the secret followed by the raw body (E2B's ``v1``, ``e2b-signature-version``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

VERSION = "v1"


def sign(secret: str, body: bytes) -> str:
    digest = hashlib.sha256(secret.encode() + body).digest()
    return base64.b64encode(digest).decode().rstrip("=")


def verify(secret: str, body: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(secret, body), signature)
