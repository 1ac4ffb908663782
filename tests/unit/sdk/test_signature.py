"""Signed file URLs match what E2B's SDK (and therefore envd) computes."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from e2b.sandbox.signature import get_signature

from bac._envd._signature import file_url, sign

CASES = [
    ("/home/user/a.txt", "read", None, "tok", None),
    ("a.txt", "write", "user", "tok", None),
    ("dir/with space/ü.txt", "read", "root", "s3cr3t", 3600),
    ("", "write", "", "x", 1),
]


@pytest.mark.parametrize(("path", "op", "user", "token", "expires"), CASES)
def test_signature_matches_e2b(
    path: str, op: str, user: str | None, token: str, expires: int | None
) -> None:
    """Bac's v1 signature is byte-identical to the official SDK's for the same inputs."""
    theirs = get_signature(path, op, user, token, expires)  # type: ignore[arg-type]
    # E2B's reads the clock itself: sign at the instant its expiration implies.
    now = None if theirs["expiration"] is None else theirs["expiration"] - (expires or 0)
    ours = sign(path, op, user, token, expires, now=now)  # type: ignore[arg-type]
    assert ours.signature == theirs["signature"]
    assert ours.expiration == theirs["expiration"]


def test_known_vector() -> None:
    """A fixed input keeps signing to the same string (guards against format drift)."""
    sig = sign("a.txt", "read", "user", "token", 60, now=1_700_000_000)
    assert sig.expiration == 1_700_000_060
    assert sig.signature == "v1_WSMfVDDpW5ScqLwex+fPnHjCZT6XWMpsX/Lndn6wIao"


def test_signing_without_token_is_refused() -> None:
    """A sandbox without an access token cannot produce signed URLs."""
    with pytest.raises(ValueError, match="access token"):
        sign("a", "read", None, "")


def test_file_url_query_shape() -> None:
    """The URL carries path, username and signature exactly as envd parses them."""
    sig = sign("my dir/f.txt", "write", "user", "tok", 10, now=100)
    url = file_url("http://localhost:3000/", "my dir/f.txt", "user", sig)
    parts = urlsplit(url)
    assert parts.path == "/files"
    assert "%20" in parts.query and "+" not in parts.query
    query = parse_qs(parts.query)
    assert query == {
        "path": ["my dir/f.txt"],
        "username": ["user"],
        "signature": [sig.signature],
        "signature_expiration": ["110"],
    }
