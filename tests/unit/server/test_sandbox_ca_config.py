"""BAC_SANDBOX_CA_CERTS read at start: the host's store or a PEM file, each certificate
parsed and written anew; a file that is missing or holds no certificate stops the server
with a line naming the setting."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cryptography import x509

from bac_server.app import HOST_CA_BUNDLE, sandbox_ca_of
from bac_server.config import ConfigError, ServerConfig


def _with(value: str) -> ServerConfig:
    return dataclasses.replace(ServerConfig(), sandbox_ca_certs=value)


def test_none_by_default_and_the_hosts_store_on_request() -> None:
    assert sandbox_ca_of(ServerConfig()) == b""
    host = sandbox_ca_of(_with("host"))
    assert host.count(b"BEGIN CERTIFICATE") == HOST_CA_BUNDLE.read_bytes().count(
        b"BEGIN CERTIFICATE") > 100


def test_a_file_is_parsed_and_bad_ones_refused(tmp_path: Path) -> None:
    one = HOST_CA_BUNDLE.read_bytes().split(b"-----END CERTIFICATE-----")[0]
    pem = tmp_path / "proxy.pem"
    pem.write_bytes(b"# the proxy's CA\n" + one + b"-----END CERTIFICATE-----\n")
    assert len(x509.load_pem_x509_certificates(sandbox_ca_of(_with(str(pem))))) == 1
    with pytest.raises(ConfigError, match="BAC_SANDBOX_CA_CERTS: cannot read"):
        sandbox_ca_of(_with(str(tmp_path / "missing.pem")))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="holds no PEM certificates"):
        sandbox_ca_of(_with(str(junk)))
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    with pytest.raises(ConfigError, match="holds no PEM certificates"):
        sandbox_ca_of(_with(str(broken)))
