"""Safe defaults of ``bac serve``: this machine only unless told, HTTPS with the operator's
certificate when given one. A real server process, real sockets, a certificate made here."""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bac_process import ServerProcess, free_port, fresh_data_dir, remove_data_dir

pytestmark = pytest.mark.root


def _trusting(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def _self_signed(where: Path) -> tuple[Path, Path]:
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True)
    return cert, key


@contextlib.contextmanager
def _serving(server: ServerProcess) -> Iterator[ServerProcess]:
    try:
        server.start()
        yield server
    finally:
        server.stop()
        remove_data_dir(server)


def _listeners(port: int) -> set[str]:
    """The local addresses of the host's TCP sockets listening on ``port`` (IPv4 and v6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server given a certificate and no BAC_HOST at all."""
    cert, key = _self_signed(tmp_path_factory.mktemp("tls"))
    server = ServerProcess(fresh_data_dir("tls"), host=None, ca=cert, extra_env={
        "BAC_TLS_CERT": str(cert), "BAC_TLS_KEY": str(key), "BAC_POOL_SIZE": "0",
        "BAC_WARM_TEMPLATES": "", "BAC_PREPARE_HOST": "false"})
    with _serving(server):
        yield server


def test_it_listens_on_the_loopback_only_by_default(tls_server: ServerProcess) -> None:
    assert _listeners(tls_server.port) == {"0100007F"}  # 127.0.0.1, little-endian hex


def test_it_speaks_https_with_the_operators_certificate(tls_server: ServerProcess) -> None:
    assert tls_server.ca is not None
    answer = httpx.get(tls_server.url + "/health", verify=_trusting(tls_server.ca), timeout=10)
    assert answer.status_code == 200
    # The certificate presented is the one configured, not some default.
    presented = ssl.get_server_certificate(("127.0.0.1", tls_server.port))
    assert ssl.PEM_cert_to_DER_cert(presented) == ssl.PEM_cert_to_DER_cert(
        tls_server.ca.read_text())
    # The REST API answers over it too (here: no key, so 401 with the JSON error shape).
    listed = httpx.get(tls_server.url + "/v2/sandboxes", verify=_trusting(tls_server.ca),
                       timeout=10)
    assert listed.status_code == 401 and "message" in listed.json()


def test_plain_http_gets_nothing_from_a_tls_server(tls_server: ServerProcess) -> None:
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{tls_server.port}/health", timeout=10)


def _serve(env_extra: dict[str, str], data: Path) -> subprocess.CompletedProcess[str]:
    bac = Path(sys.executable).parent / "bac"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "BAC_DATA_DIR": str(data),
           "BAC_PORT": str(free_port()), "BAC_PREPARE_HOST": "false", **env_extra}
    return subprocess.run([str(bac), "serve"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_a_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    cert, _ = _self_signed(tmp_path)
    done = _serve({"BAC_TLS_CERT": str(cert)}, tmp_path / "data")
    assert done.returncode != 0
    assert "BAC_TLS_CERT and BAC_TLS_KEY go together" in done.stderr.strip().splitlines()[-1]


def test_an_unreadable_key_stops_the_server_with_one_line(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    shutil.copy(cert, key)  # a certificate where the key should be
    done = _serve({"BAC_TLS_CERT": str(cert), "BAC_TLS_KEY": str(key)}, tmp_path / "data")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bac serve: cannot use BAC_TLS_CERT={cert} and BAC_TLS_KEY={key}")
