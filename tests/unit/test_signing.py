"""Signature v1 of /files URLs (bac_protocol.signing): pinned vectors, E2B's own signer, and
its users agreeing (the SDK signs, envd checks, the gateway finds the signer)."""

from __future__ import annotations

import pytest
from e2b.sandbox.signature import get_signature

import bac
from bac_envd._state import EnvdState
from bac_envd.transfer._signing import signature_error
from bac_protocol.signing import matches, parse_expiration, sign

# Computed outside Python: printf '%s' RAW | openssl dgst -sha256 -binary | openssl base64
VECTORS = [
    (("a.txt", "read", "user", "token", 1_700_000_060),
     "v1_WSMfVDDpW5ScqLwex+fPnHjCZT6XWMpsX/Lndn6wIao"),
    (("/home/user/my dir/f.txt", "write", "", "e2b-token", None),
     "v1_x6or42Sq66nKkPyLyq6jEttiyfvDAfnC9tLw0uYOOLs"),
    (("données/ü.txt", "read", "root", "tok", 42),
     "v1_zJZEp7VTOGWSblVN5P2NJHGEEio1FrXOAekDJn+bgMU"),
]


@pytest.mark.parametrize(("args", "expected"), VECTORS)
def test_known_vectors(args: tuple[str, str, str, str, int | None], expected: str) -> None:
    """The bytes on the wire: v1_ + unpadded base64 of sha256 over path:op:user:token[:exp]."""
    path, operation, user, token, expiration = args
    assert sign(path, operation, user, token, expiration) == expected  # type: ignore[arg-type]
    assert matches(expected, path, operation, user, token, expiration)  # type: ignore[arg-type]


@pytest.mark.parametrize("user", [None, "user", "root"])
@pytest.mark.parametrize("operation", ["read", "write"])
def test_equals_the_e2b_sdks_signer(user: str | None, operation: str) -> None:
    """Byte-identical to the official SDK's signature for the same inputs."""
    theirs = get_signature("/srv/x y.txt", operation, user, "tok", 60)  # type: ignore[arg-type]
    ours = sign("/srv/x y.txt", operation, user or "", "tok",  # type: ignore[arg-type]
                theirs["expiration"])
    assert ours == theirs["signature"]


def test_matches_refuses_every_other_input() -> None:
    """A signature is bound to its path, operation, user, token and expiration."""
    good = sign("a.txt", "read", "user", "token", 100)
    assert matches(good, "a.txt", "read", "user", "token", 100)
    for other in [("b.txt", "read", "user", "token", 100),
                  ("a.txt", "write", "user", "token", 100),
                  ("a.txt", "read", "", "token", 100),
                  ("a.txt", "read", "user", "other", 100),
                  ("a.txt", "read", "user", "token", 101),
                  ("a.txt", "read", "user", "token", None)]:
        assert not matches(good, *other)  # type: ignore[arg-type]
    assert not matches(good[:-1] + ("A" if good[-1] != "A" else "B"),
                       "a.txt", "read", "user", "token", 100)
    assert not matches("v1_ü", "a.txt", "read", "user", "token", 100)


def test_expiration_is_the_number_not_its_text() -> None:
    """envd and the gateway read signature_expiration the same way."""
    assert parse_expiration(None) is None
    assert parse_expiration("1700000060") == 1_700_000_060
    assert parse_expiration("0042") == 42
    with pytest.raises(ValueError):
        parse_expiration("soon")


def test_envd_accepts_what_the_sdk_signs() -> None:
    """The SDK's signed URL passes envd's check; the same URL for another path does not."""
    state = EnvdState()
    state.access_token = "tok"
    signed = bac.sign("/home/user/a.txt", "write", "user", "tok", 60)
    params = {"path": "/home/user/a.txt", "username": "user", "signature": signed.signature,
              "signature_expiration": str(signed.expiration)}
    assert signature_error(state, None, params, "write") is None
    assert signature_error(state, None, params, "read") == "invalid signature"
    assert signature_error(state, None, {**params, "path": "/etc/shadow"},
                           "write") == "invalid signature"
    stale = bac.sign("/home/user/a.txt", "write", "user", "tok", -1)
    assert signature_error(state, None, {**params, "signature": stale.signature,
                                         "signature_expiration": str(stale.expiration)},
                           "write") == "signature is already expired"
