"""Who may use ``/files``: the access token in ``X-Access-Token``, or a signed URL.

The signature is :mod:`bac_protocol.signing`'s v1, checked in constant time; the
expiration is checked only after the signature matched, so a genuine but stale URL gets
"signature is already expired". Apart from the transfers it guards, so the whole rule
reads in one place.
"""

from __future__ import annotations

import hmac
import time

from bac_envd._state import EnvdState
from bac_protocol.signing import Operation, matches, parse_expiration


def signature_error(
    state: EnvdState, header_token: str | None, params: dict[str, str], operation: Operation
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
    try:
        expiration = parse_expiration(params.get("signature_expiration"))
    except ValueError:
        return "invalid signature"
    path, username = params.get("path", ""), params.get("username", "")
    if not matches(signature, path, operation, username, token, expiration):
        return "invalid signature"
    if expiration is not None and expiration < time.time():
        return "signature is already expired"
    return None
