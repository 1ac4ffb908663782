"""envd's addition of the operator's CAs to a trust store, on real files in a temporary
tree standing for the sandbox's /: each certificate added once (by its bytes, however its
PEM is wrapped), a store made where the template has none, every bundle a distribution
keeps updated, and nothing done without certificates."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from bac_envd import _trust

CERT_A = base64.b64encode(b"a" * 90).decode()
CERT_B = base64.b64encode(b"b" * 90).decode()


def pem(body: str, width: int = 64) -> str:
    lines = [body[i:i + width] for i in range(0, len(body), width)]
    return "\n".join(["-----BEGIN CERTIFICATE-----", *lines, "-----END CERTIFICATE-----"]) + "\n"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_trust, "SOURCE", str(tmp_path / "run/bac/ca.pem"))
    monkeypatch.setattr(_trust, "BUNDLE", str(tmp_path / "etc/ssl/certs/ca-certificates.crt"))
    monkeypatch.setattr(_trust, "OTHER_BUNDLES", (str(tmp_path / "etc/pki/ca-bundle.crt"),
                                                  str(tmp_path / "etc/ssl/cert.pem")))
    monkeypatch.setattr(_trust, "LOCAL_DIR", str(tmp_path / "usr/local/share/ca-certificates"))
    (tmp_path / "run/bac").mkdir(parents=True)
    return tmp_path


def test_each_certificate_is_added_once_whatever_its_wrapping(root: Path) -> None:
    bundle = root / "etc/ssl/certs/ca-certificates.crt"
    bundle.parent.mkdir(parents=True)
    bundle.write_text(pem(CERT_A))
    (root / "usr/local/share/ca-certificates").mkdir(parents=True)
    (root / "run/bac/ca.pem").write_text(pem(CERT_A, 76) + "junk\n" + pem(CERT_B, 40))
    assert _trust.install(_trust.SOURCE) == 1
    assert _trust.certificates(bundle.read_text()) == [pem(CERT_A), pem(CERT_B)]
    assert _trust.install(_trust.SOURCE) == 0  # idempotent: a restart adds nothing
    assert bundle.read_text().count("BEGIN") == 2
    local = root / "usr/local/share/ca-certificates/bac/operator-0.crt"
    assert local.read_text() == pem(CERT_B)
    assert oct(os.stat(bundle).st_mode & 0o777) == "0o644"


def test_a_store_is_made_where_there_is_none_and_other_bundles_follow(root: Path) -> None:
    other = root / "etc/pki/ca-bundle.crt"
    other.parent.mkdir(parents=True)
    other.write_text(pem(CERT_A))
    (root / "run/bac/ca.pem").write_text(pem(CERT_B))
    assert _trust.install(_trust.SOURCE) == 1
    made = root / "etc/ssl/certs/ca-certificates.crt"
    assert _trust.certificates(made.read_text()) == [pem(CERT_A), pem(CERT_B)]
    assert _trust.certificates(other.read_text()) == [pem(CERT_A), pem(CERT_B)]


def test_nothing_is_touched_without_certificates(root: Path) -> None:
    assert _trust.install(_trust.SOURCE) == 0  # no file
    (root / "run/bac/ca.pem").write_text("not a certificate\n")
    assert _trust.install(_trust.SOURCE) == 0
    assert not (root / "etc").exists()


def test_a_relay_ca_from_init_is_added_once_beside_the_operators(root: Path) -> None:
    """``bacTrust`` (the sandbox's relay CA, just made) goes into every bundle and
    ``relay-0.crt`` without parsing the bundle; an /init sent again adds nothing."""
    from bac_envd._state import EnvdState

    bundle = root / "etc/ssl/certs/ca-certificates.crt"
    bundle.parent.mkdir(parents=True)
    bundle.write_text(pem(CERT_A))
    (root / "usr/local/share/ca-certificates").mkdir(parents=True)
    state = EnvdState()
    for _ in range(2):
        state.apply_init({"bacTrust": pem(CERT_B)}, forward=False)
    assert _trust.certificates(bundle.read_text()) == [pem(CERT_A), pem(CERT_B)]
    local = root / "usr/local/share/ca-certificates/bac/relay-0.crt"
    assert local.read_text() == pem(CERT_B)
