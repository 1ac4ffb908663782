"""Secrets at rest: values the store writes sealed with a key that is not in the database.

A sandbox's env vars (any of them may hold a secret such as an API key), its envd and
traffic access tokens, and the ends of its commands' output its trace keeps (an output
may print a secret: ``echo $OPENAI_API_KEY``) are kept as AES-256-GCM ciphertexts, so a
copy of the database (the file and its WAL, a backup, a PostgreSQL dump) reveals none of
them and grants no access to a sandbox; the key lives in a file of its own
(:mod:`.key_file`). The server still
needs the tokens in clear (connect hands the envd token back to the client, a resume
re-initialises envd with it), which is why they are sealed rather than hashed.

Sealed text is ``s1.`` + base64url(nonce ‖ ciphertext ‖ tag), unpadded: ASCII, and never
a valid token or JSON object, so sealed and plaintext values cannot be mistaken for each
other. The associated data names where the value belongs (``table.column:row key``): a
sealed value copied into another row or column does not open. Nonces are random (96
bits), fine for the 2³² values one key may seal.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bac_server.store.base import StoreError

KEY_BYTES = 32
_PREFIX = "s1."
_NONCE_BYTES = 12


class SealError(StoreError):
    """A sealed value does not open with this key (another key file, or a damaged row)."""


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(_PREFIX)


class Sealer:
    """Seals and opens values with one AES-256-GCM key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a store key is {KEY_BYTES} bytes, not {len(key)}")
        self._aead = AESGCM(key)
        self._key = key

    def derive(self, purpose: str) -> bytes:
        """A 32-byte key of its own for ``purpose``, the same wherever this store key is
        (HKDF-SHA256): what every API replica signs with alike, the store key never used
        for anything but sealing."""
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                    info=b"bac:" + purpose.encode()).derive(self._key)

    @staticmethod
    def new_key() -> bytes:
        return AESGCM.generate_key(bit_length=KEY_BYTES * 8)

    def seal(self, plaintext: str, where: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        body = nonce + self._aead.encrypt(nonce, plaintext.encode(), where.encode())
        return _PREFIX + base64.urlsafe_b64encode(body).rstrip(b"=").decode("ascii")

    def open(self, sealed: str, where: str) -> str:
        if not is_sealed(sealed):
            raise SealError(f"{where} is stored in clear; the store expects it sealed")
        text = sealed[len(_PREFIX):]
        try:
            body = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            plaintext = self._aead.decrypt(body[:_NONCE_BYTES], body[_NONCE_BYTES:],
                                           where.encode())
        except (ValueError, InvalidTag) as exc:
            raise SealError(f"{where} does not open with this store key (the key file of "
                            "another server, or a damaged row)") from exc
        return plaintext.decode()

    def seal_map(self, values: dict[str, str], where: str) -> str:
        return self.seal(json.dumps(values, sort_keys=True), where)

    def open_map(self, sealed: str, where: str) -> dict[str, str]:
        values = json.loads(self.open(sealed, where))
        if not isinstance(values, dict):
            raise SealError(f"{where} does not hold a map")
        return {str(k): str(v) for k, v in values.items()}

    def seal_optional(self, value: str | None, where: str) -> str | None:
        return None if value is None else self.seal(value, where)

    def open_optional(self, sealed: str | None, where: str) -> str | None:
        return None if sealed is None else self.open(sealed, where)


# Event fields sealed at rest: the text of a command's output (``stdout_tail``...).
SEALED_EVENT_FIELDS = frozenset({"stdout_tail", "stderr_tail"})


def seal_event_fields(sealer: Sealer, fields: dict[str, Any], sandbox_id: str) -> dict[str, Any]:
    """``fields`` with those of ``SEALED_EVENT_FIELDS`` sealed (bound to the sandbox)."""
    if not SEALED_EVENT_FIELDS & fields.keys():
        return fields
    return {k: sealer.seal(v, f"sandbox_events.{k}:{sandbox_id}")
            if k in SEALED_EVENT_FIELDS and isinstance(v, str) else v
            for k, v in fields.items()}


def open_event_fields(sealer: Sealer, fields: dict[str, Any], sandbox_id: str) -> dict[str, Any]:
    """The reverse of :func:`seal_event_fields`."""
    if not SEALED_EVENT_FIELDS & fields.keys():
        return fields
    return {k: sealer.open(v, f"sandbox_events.{k}:{sandbox_id}")
            if k in SEALED_EVENT_FIELDS and is_sealed(v) else v
            for k, v in fields.items()}
