"""Identifiers and secrets: sandbox and checkpoint ids, envd and traffic tokens, API keys.

All come from :mod:`secrets`. Sandbox ids are ``[a-z0-9]{20}`` like E2B's (the gateway splits
host names on ``-``, so ids must not contain one).
"""

from __future__ import annotations

import hashlib
import secrets
import string

_ID_ALPHABET = string.ascii_lowercase + string.digits
SANDBOX_ID_LENGTH = 20
API_KEY_PREFIX = "e2b_"  # the format E2B's SDKs and tools expect
KEY_DISPLAY_LENGTH = 12


def new_sandbox_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(SANDBOX_ID_LENGTH))


def new_checkpoint_id() -> str:
    return "c" + secrets.token_hex(8)


def new_access_token() -> str:
    """A header-safe 128-bit token, stable for the sandbox's life."""
    return secrets.token_hex(16)


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_hex(20)


def new_key_id() -> str:
    return secrets.token_hex(8)


def hash_api_key(key: str) -> str:
    # A plain hash suffices: keys carry 160 random bits, so there is nothing to brute-force.
    return hashlib.sha256(key.encode()).hexdigest()
